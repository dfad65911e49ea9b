package sqsfifo_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/idem/guarantee"
)

// TestSourceRead: both sides say they were read from the queue's
// attributes; on an emulator the dedup window, which no attribute holds,
// is unread.
func TestSourceRead(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	u, _ := e.createQueue(t, sqsemu.QueueSpec{MaxReceive: 4})
	top, err := sqsfifo.OpenTopic(t.Context(), e.client, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(t.Context(), e.client, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	name := u[strings.LastIndex(u, "/")+1:]
	want := "FIFO queue " + name + "'s attributes (GetQueueAttributes)"
	tc, sc := top.Capabilities(), sub.Capabilities()
	if tc.Source.Read != want || sc.Source.Read != want {
		t.Fatalf("read: %q, %q; want %q", tc.Source.Read, sc.Source.Read, want)
	}
	if !tc.Source.IsUnread(capability.SettingDedupWindow) || len(tc.Source.Unread) != 1 || len(tc.Source.Conflicts) != 0 {
		t.Fatalf("topic source: %+v", tc.Source)
	}
	if len(sc.Source.Unread) != 0 || len(sc.Source.Conflicts) != 0 || sc.DeliveryLimit != 4 || !sc.DeadLetter {
		t.Fatalf("subscription: %s %+v", sc, sc.Source)
	}
}

// redirect sends every request to another endpoint, so that a client
// configured with AWS's endpoint reaches the emulator.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}

// TestSourceDedupConflictOnAWS: against AWS's endpoint, a dedup window
// other than SQS's fixed 5 minutes is a conflict, stated with its fix,
// and the topic declares AWS's window.
func TestSourceDedupConflictOnAWS(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	u, _ := e.createQueue(t, sqsemu.QueueSpec{MaxReceive: 3})
	to, err := url.Parse(e.srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := e.srv.NewClient(t, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String("https://sqs." + sqsemu.Region + ".amazonaws.com")
		o.HTTPClient = &http.Client{Transport: redirect{to}}
	})
	top, err := sqsfifo.OpenTopic(t.Context(), c, u, &sqsfifo.TopicOptions{DedupWindow: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	tc := top.Capabilities()
	if tc.DedupWindow != sqsfifo.DefaultDedupWindow || len(tc.Source.Unread) != 0 || len(tc.Source.Conflicts) != 1 {
		t.Fatalf("topic: %s %+v", tc, tc.Source)
	}
	st := guarantee.Explain(guarantee.Pipeline{Topic: &tc, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}})
	if st.OK() || !strings.Contains(st.String(), "the topic's dedup window is stated as 3s") || !strings.Contains(st.String(), "drop dedup_window") {
		t.Fatalf("statement:\n%s", st)
	}
	// Without a window of its own, nothing conflicts.
	top2, err := sqsfifo.OpenTopic(t.Context(), c, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top2.Close()
	if src := top2.Capabilities().Source; len(src.Unread)+len(src.Conflicts) != 0 || src.Read == "" {
		t.Fatalf("source: %+v", src)
	}
}
