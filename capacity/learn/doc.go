// Package learn is what a store learns from the calls that settled: a
// decaying logarithmic Histogram, the Sample one settled call teaches, and
// the Learned histograms of a call kind on a scope.
//
// The gate (interceptor) records a Sample per settled call through a store
// that implements capacity.Learner, reserves the output a kind was learned
// to need, and calibrates an estimated input by the scope's learned input
// ratio (CalibrateInput). What a (scope, kind) learned is forgotten Memory
// after its last sample.
package learn
