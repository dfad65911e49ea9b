package guarantee

import (
	"fmt"
	"strings"

	"github.com/wary-go/wary/broker/capability"
)

// source states where one side's capabilities come from: it returns the
// transport line's part naming what the driver read from the broker, adds
// an Unread entry for each setting the driver could not read and a
// finding for each setting the URL or options state otherwise than the
// broker holds, and lowers v to weak for either.
func (e *explainer) source(side string, src capability.Source, v *Verdict) string {
	for _, u := range src.Unread {
		e.st.Unread = append(e.st.Unread, Finding{Stage: "transport", Problem: fmt.Sprintf("the %s's %s could not be read from the broker: %s", side, u.Setting, u.Why), Fix: u.Fix})
	}
	for _, c := range src.Conflicts {
		e.finding("transport", fmt.Sprintf("the %s's %s is stated as %s, but the broker holds %s, which applies", side, c.Setting, c.Stated, c.Held), c.Fix)
	}
	if (len(src.Unread) > 0 || len(src.Conflicts) > 0) && *v == VerdictOK {
		*v = VerdictWeak
	}
	switch {
	case src.Read != "":
		return fmt.Sprintf("%s read from %s", side, src.Read)
	case len(src.Unread) > 0:
		return fmt.Sprintf("%s not read from the broker (%s unknown)", side, settings(src.Unread))
	}
	return ""
}

func settings(us []capability.Unread) string {
	names := make([]string, len(us))
	for i, u := range us {
		names[i] = string(u.Setting)
	}
	return strings.Join(names, ", ")
}
