package devserver_test

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// Start runs a real Temporal dev server (the temporal CLI that `make
// temporal` builds) for an end-to-end test, with a client connected to it.
// In a test, StartForTest does the same and stops the server when the test
// ends.
func ExampleStart() {
	srv, err := devserver.Start(context.Background(), devserver.QuietLogger())
	if err != nil {
		fmt.Println(err) // devserver.ErrNoCLI: install it with `make temporal`
		return
	}
	defer func() { _ = srv.Stop() }()
	_, err = srv.Client().CheckHealth(context.Background(), &client.CheckHealthRequest{})
	fmt.Println("healthy:", err == nil)
	// Output: healthy: true
}
