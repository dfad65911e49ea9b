package soak

import (
	"strings"
	"testing"
)

func TestWaryKeepsOnlyWaryGoroutines(t *testing.T) {
	dump := `SIGQUIT: quit
PC=0x47a1c1 m=0 sigcode=0

goroutine 1 gp=0xc000002380 m=nil [sleep]:
time.Sleep(0x34630b8a000)
	/usr/local/go/src/runtime/time.go:300 +0xf2
main.main()
	/tmp/main.go:9 +0x25

goroutine 7 gp=0xc000102a80 m=nil [select]:
github.com/wary-go/wary/drivers/servicebus.(*sessionPool).receiveOne(0xc0001)
	/work/drivers/servicebus/session.go:217 +0x1a5
created by github.com/wary-go/wary/drivers/servicebus.newSessionPool in goroutine 1

goroutine 9 gp=0xc000103180 m=nil [chan receive]:
github.com/wary-go/wary/broker.(*Subscription).Run(0xc0002)
	/work/broker/subscription.go:88 +0x44
`
	got := wary([]byte(dump), 400)
	if strings.Contains(got, "main.main") || strings.Contains(got, "SIGQUIT") {
		t.Errorf("kept a goroutine without wary's code:\n%s", got)
	}
	for _, want := range []string{"goroutine 7 ", "(*sessionPool).receiveOne", "goroutine 9 ", "(*Subscription).Run"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if short := wary([]byte(dump), 3); strings.Count(short, "\n") > 3 {
		t.Errorf("max 3 lines, got:\n%s", short)
	}
}
