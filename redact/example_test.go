package redact_test

import (
	"fmt"
	"net/url"

	"github.com/wary-go/wary/redact"
)

func ExampleURL() {
	u, _ := url.Parse("amqp://guest:s3cret@rabbit:5672/?token=abc&queue=orders")
	fmt.Println(redact.URL(u))
	// Output: amqp://guest:xxxxx@rabbit:5672/?token=xxxxx&queue=orders
}

func ExampleString() {
	fmt.Println(redact.String("dial postgres://app:s3cret@db/orders: connection refused"))
	fmt.Println(redact.String("host=db user=app password='s 3cret'"))
	// Output:
	// dial postgres://app:xxxxx@db/orders: connection refused
	// host=db user=app password=xxxxx
}
