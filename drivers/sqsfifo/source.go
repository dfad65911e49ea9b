package sqsfifo

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker/capability"
)

// queueName is the name at the end of a queue URL
// (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME).
func queueName(queueURL string) string {
	return queueURL[strings.LastIndex(queueURL, "/")+1:]
}

// onAWS reports whether c talks to AWS rather than an emulator: no
// endpoint of its own (the SDK resolves AWS's for the region), or one
// under amazonaws.com (a regional, FIPS or VPC endpoint).
func onAWS(c *sqs.Client) bool {
	ep := aws.ToString(c.Options().BaseEndpoint)
	if ep == "" {
		return true
	}
	u, err := url.Parse(ep)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	for _, d := range []string{"amazonaws.com", "amazonaws.com.cn"} {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

// dedupSource returns the deduplication window a topic declares, and src
// with what the driver knows of it. No queue attribute holds the window:
// on AWS it is SQS's fixed 5 minutes, whatever the options state (a
// stated other window is a Conflict); on an emulator it is what the
// options state, or AWS's 5 minutes, and is unread.
func dedupSource(isAWS bool, stated time.Duration, src capability.Source) (time.Duration, capability.Source) {
	if isAWS {
		if stated > 0 && stated != DefaultDedupWindow {
			src.Conflicts = append(src.Conflicts, capability.Conflict{
				Setting: capability.SettingDedupWindow,
				Stated:  fmt.Sprintf("%s (dedup_window in the URL, or TopicOptions.DedupWindow)", stated),
				Held:    fmt.Sprintf("%s, SQS's deduplication interval, fixed by AWS", DefaultDedupWindow),
				Fix:     "drop dedup_window (TopicOptions.DedupWindow): it is for emulators configured with another window",
			})
		}
		return DefaultDedupWindow, src
	}
	w, from := stated, "dedup_window in the URL (TopicOptions.DedupWindow)"
	if w <= 0 {
		w, from = DefaultDedupWindow, "AWS's fixed interval, the driver's default"
	}
	src.Unread = append(src.Unread, capability.Unread{
		Setting: capability.SettingDedupWindow,
		Why:     fmt.Sprintf("the endpoint is not AWS's, and SQS's API has no attribute for the deduplication interval; %s is declared, from %s", w, from),
		Fix:     "none through SQS's API: make dedup_window (TopicOptions.DedupWindow) state the emulator's configured window; on AWS it is known (5 minutes)",
	})
	return w, src
}
