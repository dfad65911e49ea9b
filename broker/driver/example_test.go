package driver_test

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// An opener reads the parameters it knows and lets Done reject the rest:
// a misspelt parameter is an error, never a default applied in silence,
// and the error names the parameter without echoing any value or the
// password.
func ExampleURLParams() {
	open := func(raw string) error {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		p := driver.NewURLParams(u)
		limit := p.Int("delivery_limit", 10, 1, 1000)
		lock := p.Duration("lock", 30*time.Second, time.Second, 12*time.Hour)
		if err := p.Done(); err != nil {
			return err
		}
		fmt.Printf("delivery limit %d, lock %s\n", limit, lock)
		return nil
	}

	_ = open("queue://billing?delivery_limit=5")
	err := open("queue://app:s3cret@billing?delivery_limt=5")
	fmt.Println(err)
	fmt.Println(errors.Is(err, broker.ErrInvalid))
	fmt.Println(open("queue://billing?lock=forever"))
	// Output:
	// delivery limit 5, lock 30s
	// wary: open (invalid): unknown URL parameter(s) delivery_limt in queue://app:xxxxx@billing
	// true
	// wary: open (invalid): malformed URL parameter value(s): lock (want a duration from 1s to 12h0m0s) in queue://billing
}
