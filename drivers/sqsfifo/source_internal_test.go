package sqsfifo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

func client(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "not-a-secret-value", ""),
		BaseEndpoint: aws.String(endpoint)})
}

func TestOnAWS(t *testing.T) {
	for ep, want := range map[string]bool{
		"https://sqs.eu-west-1.amazonaws.com":                          true,
		"https://vpce-1.sqs.us-east-1.vpce.amazonaws.com":              true,
		"https://sqs.cn-north-1.amazonaws.com.cn":                      true,
		"http://127.0.0.1:4566":                                        false,
		"http://sqs.us-east-1.localhost.localstack.cloud:4566":         false,
		"https://amazonaws.com.example.net":                            false,
		"http://sqs.us-east-1.amazonaws.com.evil.example.net:9324/aws": false,
	} {
		if got := onAWS(client(ep)); got != want {
			t.Errorf("onAWS(%s) = %v", ep, got)
		}
	}
	if !onAWS(sqs.New(sqs.Options{Region: "us-east-1"})) {
		t.Error("a client without an endpoint of its own talks to AWS")
	}
}

func TestQueueName(t *testing.T) {
	if n := queueName("https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo"); n != "orders.fifo" {
		t.Fatal(n)
	}
}

// TestDedupSource: on AWS the window is SQS's fixed 5 minutes, and a
// stated other one is a conflict; on an emulator it is unread.
func TestDedupSource(t *testing.T) {
	w, src := dedupSource(true, 0, capability.Source{Read: "r"})
	if w != DefaultDedupWindow || len(src.Unread)+len(src.Conflicts) != 0 || src.Read != "r" {
		t.Fatalf("AWS, nothing stated: %s %+v", w, src)
	}
	if w, src = dedupSource(true, DefaultDedupWindow, capability.Source{}); w != DefaultDedupWindow || len(src.Conflicts) != 0 {
		t.Fatalf("AWS, 5m stated: %s %+v", w, src)
	}
	w, src = dedupSource(true, 3*time.Second, capability.Source{})
	if w != DefaultDedupWindow || len(src.Conflicts) != 1 || src.Conflicts[0].Setting != capability.SettingDedupWindow ||
		!strings.HasPrefix(src.Conflicts[0].Stated, "3s ") || !strings.HasPrefix(src.Conflicts[0].Held, "5m0s") || src.Conflicts[0].Fix == "" {
		t.Fatalf("AWS, 3s stated: %s %+v", w, src)
	}
	w, src = dedupSource(false, 3*time.Second, capability.Source{})
	if w != 3*time.Second || !src.IsUnread(capability.SettingDedupWindow) || len(src.Conflicts) != 0 || !strings.Contains(src.Unread[0].Why, "3s is declared") {
		t.Fatalf("emulator, 3s stated: %s %+v", w, src)
	}
	if w, src = dedupSource(false, 0, capability.Source{}); w != DefaultDedupWindow || !src.IsUnread(capability.SettingDedupWindow) {
		t.Fatalf("emulator, nothing stated: %s %+v", w, src)
	}
}

// TestAttributesDenied: without sqs:GetQueueAttributes the queue does not
// open; the error names the permission, and matches ErrPermission.
func TestAttributesDenied(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Query-Error", "AccessDenied;Sender")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#AccessDenied","message":"not authorized to perform sqs:GetQueueAttributes"}`))
	}))
	defer srv.Close()
	c := client(srv.URL)
	_, err := openQueue(context.Background(), c, srv.URL+"/000000000000/orders.fifo", 0)
	if !errors.Is(err, broker.ErrPermission) || !strings.Contains(err.Error(), "needs the permission sqs:GetQueueAttributes") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "not-a-secret-value") {
		t.Fatal("the error holds the secret key")
	}
}
