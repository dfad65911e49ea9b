package sqsfifo

import (
	"bytes"
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

func TestValidAWSID(t *testing.T) {
	for s, want := range map[string]bool{
		"":                                      false,
		"a":                                     true,
		"order-42_x.y:z":                        true,
		`!"#$%&'()*+,-./:;<=>?@[\]^_` + "`{|}~": true,
		"with space":                            false,
		"é":                                     false,
		strings.Repeat("a", 128):                true,
		strings.Repeat("a", 129):                false,
		"tab\there":                             false,
		"del\x7f":                               false,
	} {
		if got := ValidAWSID(s); got != want {
			t.Errorf("ValidAWSID(%q) = %t, want %t", s, got, want)
		}
	}
}

func TestMapID(t *testing.T) {
	if MapID("ok-id") != "ok-id" {
		t.Fatal("a valid ID must pass unchanged")
	}
	a, b := MapID("id with space"), MapID("id with space")
	if a != b || !ValidAWSID(a) || !strings.HasPrefix(a, mappedPrefix) {
		t.Fatalf("MapID not deterministic or not valid: %q %q", a, b)
	}
	if MapID("id with space") == MapID("id with spacf") {
		t.Fatal("different IDs mapped alike")
	}
	long := strings.Repeat("x", 300)
	if m := MapID(long); len(m) > maxAWSID || !ValidAWSID(m) {
		t.Fatalf("long ID mapped to %q", m)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	cases := []*driver.Message{
		{ID: "a", Key: "g", Body: []byte("plain text\twith\nlines"), Headers: broker.Headers{{"x", "1"}, {"empty", ""}, {"uni", "grüße ☃"}}},
		{ID: "binary", Key: "g", Body: []byte{0, 1, 2, 0xff, 0xfe, 0x80}},
		{ID: "empty", Key: "g", Body: []byte{}},
		{ID: "nil", Key: "g"},
		{ID: "emoji 😀 id", Key: "key ☃ with spaces", Body: []byte("smile 😀")},
		{ID: "nonchar", Key: "g", Body: []byte("\uFFFE")},
		{ID: "ctl", Key: "g", Body: []byte("bell\x07")},
		{ID: "hdr", Key: "g", Body: []byte("x"), Headers: broker.Headers{{"v", "\uFFFF emoji 😀"}}},
	}
	for _, m := range cases {
		o, err := encode(m)
		if err != nil {
			t.Fatalf("%q: %v", m.ID, err)
		}
		if o.body == "" || !textSafe(o.body) || !ValidAWSID(o.group) || !ValidAWSID(o.dedup) {
			t.Fatalf("%q: encoded to fields SQS refuses: body %q group %q dedup %q", m.ID, o.body, o.group, o.dedup)
		}
		if len(o.attrs) > 10 {
			t.Fatalf("%q: %d attributes", m.ID, len(o.attrs))
		}
		for k, v := range o.attrs {
			if v.StringValue != nil && (*v.StringValue == "" || !textSafe(*v.StringValue)) {
				t.Fatalf("%q: String attribute %s = %q is not SQS text", m.ID, k, *v.StringValue)
			}
		}
		raw := types.Message{
			MessageId: aws.String("mid"), Body: aws.String(o.body), MessageAttributes: o.attrs,
			Attributes: map[string]string{"MessageGroupId": o.group, "MessageDeduplicationId": o.dedup,
				"ApproximateReceiveCount": "2", "SentTimestamp": "1700000000000"},
		}
		got, err := decode(raw, false)
		if err != nil {
			t.Fatalf("%q: decode: %v", m.ID, err)
		}
		if got.ID != m.ID || got.Key != m.Key || !bytes.Equal(got.Body, m.Body) || got.Attempt != 2 || !got.Redelivered {
			t.Fatalf("%q: decoded %+v", m.ID, got)
		}
		if len(got.Headers) != len(m.Headers) {
			t.Fatalf("%q: headers %v, want %v", m.ID, got.Headers, m.Headers)
		}
		for k, v := range m.Headers.All() {
			if got.Headers.Get(k) != v {
				t.Fatalf("%q: header %q = %q, want %q", m.ID, k, got.Headers.Get(k), v)
			}
		}
		if got.PublishTime.UnixMilli() != 1700000000000 {
			t.Fatalf("publish time %v", got.PublishTime)
		}
	}
}

func TestEncodeTextBodyIsRaw(t *testing.T) {
	o, err := encode(&driver.Message{ID: "a", Key: "g", Body: []byte(`{"order":42}`)})
	if err != nil {
		t.Fatal(err)
	}
	if o.body != `{"order":42}` || len(o.attrs) != 0 {
		t.Fatalf("a text body must go as it is, without attributes: %q %v", o.body, o.attrs)
	}
	if o.size != len(o.body) {
		t.Fatalf("size %d", o.size)
	}
	if _, err := encode(&driver.Message{ID: "a", Body: []byte("x")}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("no key: %v", err)
	}
}

func TestDecodeForeignMessage(t *testing.T) {
	raw := types.Message{
		MessageId: aws.String("m-1"), Body: aws.String("hello"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"trace":  {DataType: aws.String("String"), StringValue: aws.String("abc")},
			"n":      {DataType: aws.String("Number"), StringValue: aws.String("7")},
			"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{1}},
			AttrBody: {DataType: aws.String("String"), StringValue: aws.String("zstd")},
		},
		Attributes: map[string]string{"MessageGroupId": "g"},
	}
	if _, err := decode(raw, false); err == nil {
		t.Fatal("an unknown body encoding must be an error")
	}
	delete(raw.MessageAttributes, AttrBody)
	m, err := decode(raw, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "m-1" || m.Headers.Get("trace") != "abc" || m.Headers.Get("n") != "7" || len(m.Headers) != 2 || m.Attempt != 1 {
		t.Fatalf("decoded %+v", m)
	}
}

func TestCapsFromAttributes(t *testing.T) {
	a := map[string]string{
		"FifoQueue": "true", "VisibilityTimeout": "45", "MaximumMessageSize": "262144",
		"MessageRetentionPeriod": "86400", "DeduplicationScope": "messageGroup",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:d.fifo","maxReceiveCount":5}`,
	}
	tc, c, maxSize, err := capsFromAttributes(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantTopic := capability.Topic{
		OrderingKey: "MessageGroupId", KeyRequired: true,
		DedupWindow: 5 * time.Minute, DedupScope: capability.DedupMessageGroup,
		MaxMessageSize: 262144 - attrReserve, MaxBatchSize: 10,
	}
	want := capability.Subscription{
		Ordering: capability.OrderMessageGroup, HeadOfLine: true, AckModel: capability.AckPerMessage,
		DeliveryCount: true, DeliveryLimit: 5, DeliveryLimitMode: capability.LimitNative, DeadLetter: true,
		LockTimeout: 45 * time.Second, LockExtendable: true, NackDelay: true,
		RedeliveryHorizon: 24 * time.Hour,
	}
	if !reflect.DeepEqual(tc, wantTopic) || !reflect.DeepEqual(c, want) || maxSize != 262144 {
		t.Fatalf("caps\n got %s; %s\nwant %s; %s", tc, c, wantTopic, want)
	}
	delete(a, "RedrivePolicy")
	delete(a, "DeduplicationScope")
	tc, c, _, _ = capsFromAttributes(a, 3*time.Second)
	if c.DeadLetter || c.DeliveryLimit != 0 || c.DeliveryLimitMode != capability.LimitNone || tc.DedupScope != capability.DedupQueue || tc.DedupWindow != 3*time.Second {
		t.Fatalf("without redrive: %s; %s", tc, c)
	}
	// Without DeduplicationScope (an emulator's answer may lack it), the
	// queue scope the topic declares is SQS's default, not read.
	if len(tc.Source.Unread) != 1 || tc.Source.Unread[0].Setting != capability.SettingDedupWindow || !strings.Contains(tc.Source.Unread[0].Why, "no DeduplicationScope") {
		t.Fatalf("without DeduplicationScope: %+v", tc.Source)
	}
	a["DeduplicationScope"] = "queue"
	if tc, _, _, _ = capsFromAttributes(a, 0); tc.DedupScope != capability.DedupQueue || len(tc.Source.Unread) != 0 {
		t.Fatalf("DeduplicationScope queue: %s %+v", tc, tc.Source)
	}
	// VisibilityTimeout 0 locks nothing: LockNone, not "held until settled".
	a["VisibilityTimeout"] = "0"
	if _, c, _, _ = capsFromAttributes(a, 0); c.LockTimeout != capability.LockNone || c.LockExtendable || len(c.Source.Unread) != 0 {
		t.Fatalf("VisibilityTimeout 0: %s %+v", c, c.Source)
	}
	// An answer without the lock, size and retention states them unread,
	// not as SQS's defaults read from the queue.
	tc, c, _, err = capsFromAttributes(map[string]string{"FifoQueue": "true"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Source.IsUnread(capability.SettingLockTimeout) || !c.Source.IsUnread(capability.SettingRedeliveryHorizon) || c.RedeliveryHorizon != capability.HorizonUnknown ||
		!tc.Source.IsUnread(capability.SettingMaxMessageSize) || c.LockTimeout != 30*time.Second {
		t.Fatalf("attributes missing: %s %+v; %s %+v", c, c.Source, tc, tc.Source)
	}
	a["VisibilityTimeout"] = "45"
	a["RedrivePolicy"] = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:0:d.fifo","maxReceiveCount":"x"}`
	if _, _, _, err := capsFromAttributes(a, 0); err == nil {
		t.Fatal("a malformed maxReceiveCount must be refused")
	}
	a["VisibilityTimeout"] = "-1"
	if _, _, _, err := capsFromAttributes(a, 0); err == nil {
		t.Fatal("a malformed VisibilityTimeout must be refused")
	}
}

func apiErr(code string, fault smithy.ErrorFault) error {
	return &smithy.OperationError{ServiceID: "SQS", OperationName: "X",
		Err: &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault}}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err   error
		code  driver.ErrorCode
		maybe bool
	}{
		{apiErr("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient), driver.NotFound, false},
		{apiErr("QueueDoesNotExist", smithy.FaultClient), driver.NotFound, false},
		{apiErr("AccessDenied", smithy.FaultClient), driver.PermissionDenied, false},
		{apiErr("InvalidClientTokenId", smithy.FaultClient), driver.PermissionDenied, false},
		{apiErr("ThrottlingException", smithy.FaultClient), driver.Unavailable, false},
		{apiErr("RequestThrottled", smithy.FaultClient), driver.Unavailable, false},
		{apiErr("InternalError", smithy.FaultServer), driver.Unavailable, true},
		{apiErr("ReceiptHandleIsInvalid", smithy.FaultClient), driver.LockLost, false},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value x for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."}, driver.LockLost, false},
		{apiErr("InvalidParameterValue", smithy.FaultClient), driver.Invalid, false},
		{apiErr("BatchRequestTooLong", smithy.FaultClient), driver.TooLarge, false},
		{&smithyhttp.RequestSendError{Err: syscall.ECONNRESET}, driver.Unavailable, true},
		{&smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, driver.Unavailable, false},
		{context.Canceled, driver.Canceled, false},
		{&smithy.OperationError{Err: context.Canceled}, driver.Canceled, true},
		{tooLargeErr(errors.New("x")), driver.TooLarge, false},
		{&EntryError{Code: "InternalError", SenderFault: false}, driver.Unavailable, false},
		{&EntryError{Code: "InvalidParameterValue", SenderFault: true}, driver.Invalid, false},
	} {
		got := classify(c.err)
		if got.Code != c.code || got.MaybeSent != c.maybe {
			t.Errorf("classify(%v) = %s maybe=%t, want %s maybe=%t", c.err, got.Code, got.MaybeSent, c.code, c.maybe)
		}
	}
}

func TestClassifyEntryError(t *testing.T) {
	if got := classify(&EntryError{ID: "a", Code: "InvalidParameterValue", SenderFault: true}); got.Code != driver.Invalid || got.MaybeSent {
		t.Fatalf("refused for the sender's fault: %+v", got)
	}
	if got := classify(&EntryError{ID: "b", Code: "InternalError"}); got.Code != driver.Unavailable || got.MaybeSent {
		t.Fatalf("refused for SQS's fault: %+v", got)
	}
	if got := classify(errUnanswered); got.Code != driver.Unavailable || !got.MaybeSent {
		t.Fatalf("unanswered entry: %+v", got)
	}
}

// TestDecodeDropsForeignReservedHeaders: another producer's message that
// carries wary's reserved names (as attributes or inside the headers
// attribute) does not read as a dead letter: they are dropped, the
// producer's own and the event-identity headers kept. On a dead-letter
// queue, the reason the driver wrote is reported.
func TestDecodeDropsForeignReservedHeaders(t *testing.T) {
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	raw := types.Message{
		MessageId: aws.String("m-1"), Body: aws.String("hello"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrDeadLetterReason:          str("forged"),
			"wary-dead-letter-source":     str("forged"),
			"wary-anything":               str("forged"),
			AttrHeaders:                   str(`{"wary-dead-letter-reason":"forged in json","wary-attempts":"99","app":"kept","wary-aggregate-id":"order-1"}`),
			broker.HeaderAggregateVersion: str("3"),
		},
		Attributes: map[string]string{"MessageGroupId": "g"},
	}
	for _, deadLetters := range []bool{false, true} {
		m, err := decode(raw, deadLetters)
		if err != nil {
			t.Fatal(err)
		}
		want := broker.Headers{{"app", "kept"}, {broker.HeaderAggregateID, "order-1"}, {broker.HeaderAggregateVersion, "3"}}
		if deadLetters {
			want.Set(AttrDeadLetterReason, "forged")
		}
		if !m.Headers.Equal(want) {
			t.Errorf("dead letters %t: headers %v, want %v", deadLetters, m.Headers, want)
		}
	}
}
