//go:build sqsfifo

package main

import (
	"strings"
	"testing"

	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestSQSFIFO: on an SQS FIFO queue (fauxqs) the run publishes and
// consumes there, and a second run on the same queue is not swallowed by
// the first run's dedup window.
func TestSQSFIFO(t *testing.T) {
	srv := sqsemu.Start(t, sqsemu.Options{})
	queueURL, _ := sqsemu.CreateQueue(t, srv.NewClient(t, nil), sqsemu.QueueSpec{NamePrefix: "quickstart"})
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	u := "sqsfifo://" + name + "?endpoint=" + srv.Endpoint + "&region=" + sqsemu.Region
	for range 2 {
		out := quickstart(t, "-broker", u)
		has(t, out, "broker: sqsfifo://"+name, "handle order-1/created@", "done: 4 distinct events handled, the duplicate publish was dropped")
	}

}
