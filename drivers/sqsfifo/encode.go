package sqsfifo

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker/driver"
)

// Message attributes the driver writes and reads. Together they take at
// most five of the ten attributes AWS allows on a message.
const (
	// AttrHeaders holds every header, as one JSON object of strings.
	AttrHeaders = "wary-headers"
	// AttrID holds the message ID when it is not a valid
	// MessageDeduplicationId and was mapped (see MapID).
	AttrID = "wary-id"
	// AttrKey holds the ordering key when it is not a valid MessageGroupId
	// and was mapped.
	AttrKey = "wary-key"
	// AttrBody says how the body is encoded: absent (the body is the
	// message's bytes, which were UTF-8 text SQS accepts), "base64"
	// (standard encoding, with padding) or "empty" (an empty body, sent as
	// "-" because SQS refuses empty bodies).
	AttrBody = "wary-body"
	// AttrDeadLetterReason holds the reason given to DeadLetter, on the
	// copy in the dead-letter queue.
	AttrDeadLetterReason = driver.HeaderDeadLetterReason
)

// Body encodings (values of AttrBody).
const (
	bodyBase64 = "base64"
	bodyEmpty  = "empty"
	emptyBody  = "-"
)

// maxAWSID is the longest MessageGroupId or MessageDeduplicationId.
const maxAWSID = 128

// mappedPrefix starts every mapped ID or key.
const mappedPrefix = "wary-sha256-"

// ValidAWSID reports whether s may be sent as a MessageGroupId or
// MessageDeduplicationId as it is: 1 to 128 characters, each an ASCII
// letter, digit or punctuation character (0x21 to 0x7E).
func ValidAWSID(s string) bool {
	if s == "" || len(s) > maxAWSID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

// MapID returns s when ValidAWSID(s), and otherwise "wary-sha256-"
// followed by the hex SHA-256 of s (76 characters): the same input always
// maps to the same output, so that dedup and grouping keep working for IDs
// and keys AWS would refuse. The driver carries the original in AttrID or
// AttrKey and restores it on receive.
func MapID(s string) string {
	if ValidAWSID(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return mappedPrefix + hex.EncodeToString(sum[:])
}

// xmlChar reports whether r is a character SQS accepts in a body or a
// String attribute (#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
// #x10000-#x10FFFF). The driver sends as text only the Basic Multilingual
// Plane part of that set: emulators (fauxqs) refuse characters above
// U+FFFF, so bodies holding them go base64 too.
func xmlChar(r rune) bool {
	switch {
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	}
	return false
}

// textSafe reports whether s can travel as SQS text unchanged.
func textSafe(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !xmlChar(r) {
			return false
		}
		i += n
	}
	return true
}

// encodeBody returns the SQS body for b and its AttrBody value ("" when
// the body travels as it is).
func encodeBody(b []byte) (string, string) {
	if len(b) == 0 {
		return emptyBody, bodyEmpty
	}
	if s := string(b); textSafe(s) {
		return s, ""
	}
	return base64.StdEncoding.EncodeToString(b), bodyBase64
}

func decodeBody(s, enc string) ([]byte, error) {
	switch enc {
	case "":
		return []byte(s), nil
	case bodyEmpty:
		return []byte{}, nil
	case bodyBase64:
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("sqsfifo: unknown body encoding %q in attribute %s", enc, AttrBody)
}

// textAttr is a String attribute when v can travel as text, else a Binary
// one holding v's bytes (the reader accepts both).
func textAttr(v string) types.MessageAttributeValue {
	if v != "" && textSafe(v) {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return types.MessageAttributeValue{DataType: aws.String("Binary"), BinaryValue: []byte(v)}
}

func attrText(a types.MessageAttributeValue) (string, bool) {
	if a.StringValue != nil {
		return *a.StringValue, true
	}
	if a.BinaryValue != nil {
		return string(a.BinaryValue), true
	}
	return "", false
}

// outgoing is one message, encoded.
type outgoing struct {
	id    string // the wary ID
	body  string
	group string
	dedup string
	attrs map[string]types.MessageAttributeValue
	size  int // as SQS counts it: body plus attribute names, types and values
}

// encode maps m to SQS's fields and checks AWS's input rules that the
// portable layer does not know.
func encode(m *driver.Message) (outgoing, error) {
	if m.Key == "" {
		return outgoing{}, invalidErr(fmt.Errorf("message %q has no MessageGroupId (Message.Key)", m.ID))
	}
	o := outgoing{id: m.ID, group: MapID(m.Key), dedup: MapID(m.ID), attrs: map[string]types.MessageAttributeValue{}}
	var enc string
	o.body, enc = encodeBody(m.Body)
	if enc != "" {
		o.attrs[AttrBody] = textAttr(enc)
	}
	if o.dedup != m.ID {
		o.attrs[AttrID] = textAttr(m.ID)
	}
	if o.group != m.Key {
		o.attrs[AttrKey] = textAttr(m.Key)
	}
	if len(m.Headers) > 0 {
		js, err := json.Marshal(m.Headers)
		if err != nil {
			return outgoing{}, invalidErr(err)
		}
		o.attrs[AttrHeaders] = textAttr(string(js))
	}
	o.size = len(o.body)
	for k, v := range o.attrs {
		o.size += attrSize(k, v)
	}
	return o, nil
}

func attrSize(name string, v types.MessageAttributeValue) int {
	n := len(name) + len(aws.ToString(v.DataType)) + len(v.BinaryValue)
	if v.StringValue != nil {
		n += len(*v.StringValue)
	}
	return n
}

// decode maps a received SQS message to a driver message. Attributes other
// than the driver's own, of type String or Number, become headers, so that
// messages from producers that do not use wary read naturally. Reserved
// headers (wary-...) that another producer could have set are dropped; the
// dead-letter reason is kept only when deadLetters (a dead-letter queue,
// where the driver wrote it).
func decode(raw types.Message, deadLetters bool) (*driver.Message, error) {
	m := &driver.Message{
		ID:      raw.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)],
		Key:     raw.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		Headers: driver.Headers{},
	}
	var enc, reason string
	for k, a := range raw.MessageAttributes {
		v, ok := attrText(a)
		if !ok {
			continue
		}
		switch k {
		case AttrHeaders:
			var js driver.Headers
			if err := json.Unmarshal([]byte(v), &js); err != nil {
				return nil, fmt.Errorf("sqsfifo: attribute %s is not a JSON object of strings: %w", AttrHeaders, err)
			}
			for k, v := range js.All() { // over any attribute of the same name
				m.Headers.Set(k, v)
			}
		case AttrID:
			m.ID = v
		case AttrKey:
			m.Key = v
		case AttrBody:
			enc = v
		case AttrDeadLetterReason:
			reason = v
		default:
			dt := aws.ToString(a.DataType)
			if a.StringValue != nil && (strings.HasPrefix(dt, "String") || strings.HasPrefix(dt, "Number")) {
				if _, set := m.Headers.Lookup(k); !set {
					m.Headers.Set(k, v)
				}
			}
		}
	}
	m.Headers = slices.DeleteFunc(m.Headers, func(h [2]string) bool { return driver.ReservedHeader(h[0]) })
	if deadLetters && reason != "" {
		m.Headers.Set(AttrDeadLetterReason, reason)
	}
	if m.ID == "" {
		m.ID = aws.ToString(raw.MessageId)
	}
	body, err := decodeBody(aws.ToString(raw.Body), enc)
	if err != nil {
		return nil, err
	}
	m.Body = body
	if n, err := strconv.Atoi(raw.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil && n > 0 {
		m.Attempt = n
	} else {
		m.Attempt = 1
	}
	m.Redelivered = m.Attempt > 1
	if ms, err := strconv.ParseInt(raw.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		m.PublishTime = time.UnixMilli(ms)
	}
	return m, nil
}
