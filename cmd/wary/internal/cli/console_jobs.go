package cli

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/admin"
)

// job is a long action (a replay, a probe) that the console runs in the
// background; its page and /api/jobs/ID show its progress.
type job struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	What  string `json:"what"`
	Total int    `json:"total"`

	mu      sync.Mutex
	started time.Time
	steps   []string
	done    bool
	err     string
	result  any
}

// jobJSON is a job's state at one time.
type jobJSON struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	What    string    `json:"what"`
	Started time.Time `json:"started"`
	Total   int       `json:"total"`
	Steps   []string  `json:"steps"`
	Done    bool      `json:"done"`
	Error   string    `json:"error,omitempty"`
	Result  any       `json:"result,omitempty"`
}

func (j *job) state() jobJSON {
	j.mu.Lock()
	defer j.mu.Unlock()
	return jobJSON{ID: j.ID, Kind: j.Kind, What: j.What, Started: j.started, Total: j.Total, Steps: append([]string{}, j.steps...),
		Done: j.done, Error: j.err, Result: j.result}
}

func (j *job) step(s string) {
	j.mu.Lock()
	j.steps = append(j.steps, s)
	j.mu.Unlock()
}

// keepJobs is how many of the latest jobs the console keeps to show.
const keepJobs = 100

func (con *console) startJob(kind, what string, total int) *job {
	con.mu.Lock()
	defer con.mu.Unlock()
	con.nextJob++
	j := &job{ID: con.nextJob, Kind: kind, What: what, Total: total, started: time.Now()}
	con.jobs[j.ID] = j
	delete(con.jobs, j.ID-keepJobs) // the audit log keeps what they did
	return j
}

// finish records a job's outcome and its audit entry.
func (con *console) finish(j *job, operator, action, what string, n int, result any, err error) {
	entry := admin.AuditEntry{Who: operator, Action: action, What: what, Count: n}
	if err != nil {
		entry.Detail = redactErr(err)
	}
	aerr := con.record(con.ctx, entry)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.done, j.result = true, result
	if err != nil {
		j.err = redactErr(err)
	}
	if aerr != nil {
		j.err = strings.TrimPrefix(j.err+"; "+aerr.Error(), "; ")
	}
}

func (con *console) jobPage(w http.ResponseWriter, r *http.Request) error {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	con.mu.Lock()
	j := con.jobs[id]
	con.mu.Unlock()
	if j == nil {
		return badRequest{fmt.Sprintf("no job %s", r.PathValue("id"))}
	}
	con.render(w, r, "job", http.StatusOK, j.state())
	return nil
}

func (con *console) probePage(w http.ResponseWriter, r *http.Request) error {
	con.render(w, r, "probe", http.StatusOK, map[string]any{"scenarios": conformance.Scenarios(), "url": redactText(con.flags.pipe.sub)})
	return nil
}

// probeReporter turns the probe's progress into job steps.
type probeReporter struct{ j *job }

func (p probeReporter) Start(scenario string) { p.j.step(scenario + ": running") }
func (p probeReporter) Done(r conformance.Result) {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	if n := len(p.j.steps); n > 0 && p.j.steps[n-1] == r.Scenario+": running" {
		p.j.steps = p.j.steps[:n-1]
	}
	p.j.steps = append(p.j.steps, fmt.Sprintf("%s: %s", r.Scenario, r.Outcome))
}

// probeStart runs the conformance probe against the form's URL as a job.
func (con *console) probeStart(w http.ResponseWriter, r *http.Request) error {
	raw := strings.TrimSpace(r.PostFormValue("url"))
	if raw == "" {
		return badRequest{"give the broker URL to probe"}
	}
	var only []string
	for _, s := range strings.Split(r.PostFormValue("only"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			only = append(only, s)
		}
	}
	only = append(only, r.PostForm["scenario"]...)
	total := len(only)
	if total == 0 {
		total = len(conformance.Scenarios())
	}
	j := con.startJob("probe", redactText(raw), total)
	operator := who(r)
	con.wg.Go(func() {
		res, err := con.app.probe(con.ctx, raw, only, probeReporter{j})
		var result any
		if err == nil {
			result = res
		}
		con.finish(j, operator, "probe", strconv.Quote(redactText(raw)), len(res.Results), result, err)
	})
	con.done(w, r, fmt.Sprintf("/jobs/%d", j.ID), map[string]int64{"job": j.ID})
	return nil
}
