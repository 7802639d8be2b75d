// Package ledger is the cost ledger: what every call that settled with
// usage spent, summed per day, scope, tenant and workflow type.
//
// A Ledger records an Entry once per lease (a retried record is counted
// once), answers what a tenant and a connection spent in a day (Spent, for
// spend caps) and lists its Rows (`tollgate cost`). The Redis store is a
// Ledger shared by every worker; NewMemory is one for a single process.
// Both keep a day for Retention after its last record and pass one
// contract suite (storetest.RunLedger). Days are dates in the quota's day
// window (Day), so a ledger day matches the provider's daily limit.
package ledger
