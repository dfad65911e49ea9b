package rabbit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// ManagementOff, as SubscriptionOptions.Management (management=off in a
// URL), reads nothing through the management API: only what AMQP shows.
const ManagementOff = "off"

// mgmtTimeout bounds each request to the management API.
const mgmtTimeout = 3 * time.Second

// mgmtClient reads queues and policies through RabbitMQ's management HTTP
// API. Its String never shows the password.
type mgmtClient struct {
	base       *url.URL // no userinfo
	user, pass string   // secret: pass is never printed
	vhost      string
	// hc keeps no idle connection: a subscription reads a few times when
	// it opens, and nothing of the client may outlive it.
	hc *http.Client
}

// String is the API's address without credentials.
func (m *mgmtClient) String() string { return m.base.Host }

// newMgmtClient returns the client for the management API at setting
// (SubscriptionOptions.Management) for the server at amqpURL: "" derives
// http://HOST:15672 (https://HOST:15671 for amqps) with the AMQP URL's
// user and password; an http(s) URL names it, its own user and password
// replacing the AMQP URL's. It returns nil for ManagementOff.
func newMgmtClient(setting, amqpURL string) (*mgmtClient, error) {
	if setting == ManagementOff {
		return nil, nil
	}
	uri, err := amqp.ParseURI(amqpURL)
	if err != nil {
		return nil, driver.Invalidf("rabbit: the server URL does not parse as an AMQP URI")
	}
	m := &mgmtClient{user: uri.Username, pass: uri.Password, vhost: uri.Vhost, hc: &http.Client{Timeout: mgmtTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}}
	if setting == "" {
		scheme, port := "http", "15672"
		if uri.Scheme == "amqps" {
			scheme, port = "https", "15671"
		}
		m.base = &url.URL{Scheme: scheme, Host: net.JoinHostPort(uri.Host, port)}
		return m, nil
	}
	u, err := url.Parse(setting)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, driver.Invalidf("rabbit: the management address is not http[s]://host:port[/path] (or %q)", ManagementOff)
	}
	if u.User != nil {
		m.user = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			m.pass = pw
		}
		u.User = nil
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	m.base = u
	return m, nil
}

// mgmtError says why the management API could not answer, for people: it
// holds neither the password nor the request's URL.
type mgmtError struct{ why string }

func (e *mgmtError) Error() string { return e.why }

// get fetches path (segments escaped by the caller) into v. A 404 is
// reported as found false.
func (m *mgmtClient) get(ctx context.Context, path string, v any) (found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, mgmtTimeout)
	defer cancel()
	u := *m.base
	u.RawPath = m.base.EscapedPath() + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, &mgmtError{"the management API's address " + m.String() + " is not usable"}
	}
	req.SetBasicAuth(m.user, m.pass)
	req.Header.Set("Accept", "application/json")
	resp, err := m.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return false, &mgmtError{fmt.Sprintf("the management API at %s did not answer (%v)", m, err)}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return false, &mgmtError{fmt.Sprintf("the management API at %s refused user %q (%d): it needs the monitoring tag (or policymaker, for policies) and access to the virtual host", m, m.user, resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		return false, &mgmtError{fmt.Sprintf("the management API at %s answered %d", m, resp.StatusCode)}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(v); err != nil {
		return false, &mgmtError{fmt.Sprintf("the management API at %s answered what is not JSON (%v)", m, err)}
	}
	return true, nil
}

// mgmtQueue is what GET /api/queues/{vhost}/{name} returns that matters
// here. EffectivePolicy is nil when the queue's statistics have not been
// collected yet (right after it was declared), not when it has no policy.
type mgmtQueue struct {
	Name            string                     `json:"name"`
	Type            string                     `json:"type"`
	Arguments       map[string]json.RawMessage `json:"arguments"`
	Policy          json.RawMessage            `json:"policy"`
	OperatorPolicy  json.RawMessage            `json:"operator_policy"`
	EffectivePolicy map[string]json.RawMessage `json:"effective_policy_definition"`
}

// mgmtPolicy is one entry of GET /api/policies/{vhost} or
// /api/operator-policies/{vhost}.
type mgmtPolicy struct {
	Name       string                     `json:"name"`
	Pattern    string                     `json:"pattern"`
	ApplyTo    string                     `json:"apply-to"`
	Priority   int                        `json:"priority"`
	Definition map[string]json.RawMessage `json:"definition"`
}

func (m *mgmtClient) queue(ctx context.Context, name string) (*mgmtQueue, error) {
	var q mgmtQueue
	found, err := m.get(ctx, "/api/queues/"+url.PathEscape(m.vhost)+"/"+url.PathEscape(name), &q)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &mgmtError{fmt.Sprintf("the management API at %s has no queue %q in virtual host %q (another server than the AMQP URL's?)", m, name, m.vhost)}
	}
	return &q, nil
}

// policy returns the definition of the policy (operator: the operator
// policy) that applies to the queue name of type typ: the matching one of
// highest priority, nil if none matches.
func (m *mgmtClient) policy(ctx context.Context, operator bool, name, typ string) (*mgmtPolicy, error) {
	path := "/api/policies/"
	if operator {
		path = "/api/operator-policies/"
	}
	var ps []mgmtPolicy
	if _, err := m.get(ctx, path+url.PathEscape(m.vhost), &ps); err != nil {
		return nil, err
	}
	var best *mgmtPolicy
	for i := range ps {
		p := &ps[i]
		switch p.ApplyTo {
		case "all", "queues":
		case "quorum_queues", "classic_queues", "streams":
			if p.ApplyTo != typ+"s" && p.ApplyTo != typ+"_queues" {
				continue
			}
		default:
			continue
		}
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return nil, &mgmtError{fmt.Sprintf("policy %q's pattern is not one Go's regexp reads, so whether it applies cannot be told", p.Name)}
		}
		if re.MatchString(name) && (best == nil || p.Priority > best.Priority) {
			best = p
		}
	}
	return best, nil
}

// effectivePolicy returns q's effective policy definition: the merge of
// the policy and the operator policy that match the queue, as RabbitMQ
// merges them (the smaller value of numeric keys both set), computed from
// the policies themselves; when the user may not list them (that takes
// the policymaker tag), the definition the queue's statistics report,
// which lag a policy change by up to the statistics interval (5 s by
// default) and are missing right after the queue was declared.
func (m *mgmtClient) effectivePolicy(ctx context.Context, q *mgmtQueue) (map[string]json.RawMessage, error) {
	pol, err := m.policy(ctx, false, q.Name, q.Type)
	var op *mgmtPolicy
	if err == nil {
		op, err = m.policy(ctx, true, q.Name, q.Type)
	}
	if err != nil {
		if q.EffectivePolicy != nil {
			return q.EffectivePolicy, nil
		}
		return nil, err
	}
	def := map[string]json.RawMessage{}
	if pol != nil {
		for k, v := range pol.Definition {
			def[k] = v
		}
	}
	if op != nil {
		for k, v := range op.Definition {
			a, aok := jsonInt(def[k])
			b, bok := jsonInt(v)
			switch {
			case def[k] == nil:
				def[k] = v
			case aok && bok:
				def[k] = json.RawMessage(strconv.FormatInt(min(a, b), 10))
			}
		}
	}
	return def, nil
}

// jsonInt reads an integer from a JSON value (nil: absent).
func jsonInt(v json.RawMessage) (int64, bool) {
	if v == nil {
		return 0, false
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// jsonString reads a string from a JSON value (nil: absent).
func jsonString(v json.RawMessage) (string, bool) {
	if v == nil {
		return "", false
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err == nil
}
