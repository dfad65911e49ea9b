package cli

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/redact"
)

// EnvConsoleToken gives wary console its access token when --token does not.
const EnvConsoleToken = "WARY_CONSOLE_TOKEN"

//go:embed web
var webFS embed.FS

type consoleFlags struct {
	pipe              explainFlags
	addr, token       string
	readOnly          bool
	sample            time.Duration
	replayTo, dlqTo   string
	deadLetterSources []string
}

func (a *app) consoleCmd() *cobra.Command {
	var f consoleFlags
	c := &cobra.Command{
		Use:   "console --broker URL --subscription URL (--postgres URL | --mysql DSN) --consumer NAME [--addr HOST:PORT]",
		Short: "Serve the operator's web page: the guarantee, what is stuck, and the actions that put it back",
		Long: `console serves one web application, from this binary, over the same
operations as the other commands: a dashboard (the guarantee statement of
"wary explain" with its misconfigurations, the outbox backlog with charts
of the last hour, parked, quarantined and dead-lettered counts, unresolved
idempotency keys; each source's dead letters are looked at once a load,
peeked where the broker can, and the statement counts from that look),
the parked messages with replay (dry run first, a rate
limit, live progress) and discard, the early events an inbox holds before
it parks them (read-only), quarantined outbox rows, dead letters
grouped by reason with replay, the conformance probe, and an audit log of
every action, kept in the store's database (PREFIXoperator_audit, which the
console creates, and where the parked and outbox commands then record
theirs too): a store on PostgreSQL (--postgres) or on MySQL or MariaDB
(--mysql), not SQLite. Everything it shows is also JSON under /api/.

Access: it binds 127.0.0.1:7070 by default. Any other address needs
--token (or $WARY_CONSOLE_TOKEN, at least 16 characters), which a browser
gives once on the login page and an API client as "Authorization: Bearer
TOKEN"; the console serves plain HTTP, so TLS (or a proxy that adds it) is
yours to put in front. Every state-changing request carries the page's
CSRF token. --read-only serves the pages without any action. No password,
key or token appears in a page or an API answer.`,
		Example: `  wary console --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing
  WARY_CONSOLE_TOKEN=$(openssl rand -hex 16) wary console --addr 0.0.0.0:7070 --read-only --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing
  wary console --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --mysql "$WARY_MYSQL_URL" --consumer billing`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			token := a.envDefault(f.token, EnvConsoleToken)
			if err := checkBind(f.addr, token); err != nil {
				return err
			}
			if f.pipe.store.sqlite != "" || f.pipe.store.mysql == "" && a.envDefault(f.pipe.store.postgres, EnvPostgres) == "" {
				return fmt.Errorf("the console keeps its audit log in the store's database, PostgreSQL or MySQL: give --postgres URL (or $%s) or --mysql DSN", EnvPostgres)
			}
			p, err := a.pipeline(c, &f.pipe)
			if err != nil {
				return err
			}
			d, err := a.openStore(ctx, &f.pipe.store)
			if err != nil {
				return err
			}
			defer d.close()
			if err := d.CreateAudit(ctx); err != nil {
				return fmt.Errorf("create the audit table: %s", redactErr(err))
			}
			ln, err := net.Listen("tcp", f.addr)
			if err != nil {
				return err
			}
			con, err := newConsole(a, &f, p, d, token)
			if err != nil {
				ln.Close()
				return err
			}
			mode := "read-write"
			if f.readOnly {
				mode = "read-only"
			}
			fmt.Fprintf(a.io.Out, "wary console on http://%s (%s)\n", ln.Addr(), mode)
			return con.serve(ctx, ln)
		},
	}
	f.pipe.add(c)
	c.Flags().StringVar(&f.addr, "addr", "127.0.0.1:7070", "address to listen on; other than loopback, --token is required")
	c.Flags().StringVar(&f.token, "token", "", "access token every request must carry (default $"+EnvConsoleToken+")")
	c.Flags().BoolVar(&f.readOnly, "read-only", false, "show everything, change nothing")
	c.Flags().DurationVar(&f.sample, "sample", 10*time.Second, "how often the charts sample the outbox")
	c.Flags().StringVar(&f.replayTo, "replay-to", "", "topic URL parked messages are replayed to (default --broker)")
	c.Flags().StringArrayVar(&f.deadLetterSources, "dead-letters", nil, "subscription URL whose dead letters to show (repeatable; default --subscription)")
	c.Flags().StringVar(&f.dlqTo, "dead-letters-to", "", "topic URL dead letters are replayed to (default --broker)")
	return c
}

// checkBind refuses a non-loopback address without a token.
func checkBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if token != "" && len(token) < 16 {
		return errors.New("--token is too short: give at least 16 characters (openssl rand -hex 16)")
	}
	if token != "" || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address: give --token (or $%s), which every request must then carry; "+
		"the console serves plain HTTP, so TLS, or a proxy that adds it, is yours to put in front", addr, EnvConsoleToken)
}

// console is one running console: its pipeline, store, audit log, charts
// and jobs.
type console struct {
	app      *app
	flags    *consoleFlags
	pipeline guarantee.Pipeline
	db       *db
	token    string
	csrf     string // the CSRF token of this run's pages
	session  string // the cookie a browser gets for the token
	pages    map[string]*template.Template
	log      *slog.Logger

	mu      sync.Mutex
	samples []sample
	jobs    map[int64]*job
	nextJob int64
	wg      sync.WaitGroup // jobs and the sampler
	ctx     context.Context
}

// sample is the outbox's backlog and oldest unsent age at one time.
type sample struct {
	At      time.Time `json:"at"`
	Backlog int64     `json:"backlog"`
	AgeSec  float64   `json:"oldest_unsent_age_seconds"`
}

func newConsole(a *app, f *consoleFlags, p guarantee.Pipeline, d *db, token string) (*console, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	mac := func(s string) string {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return hex.EncodeToString(h.Sum(nil))
	}
	return &console{app: a, flags: f, pipeline: p, db: d, token: token, csrf: mac("csrf"), session: mac("session"),
		pages: pages, log: slog.New(slog.NewTextHandler(a.io.Err, nil)), jobs: map[int64]*job{}}, nil
}

// serve serves on ln until ctx is done, then waits for running jobs.
func (con *console) serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	con.ctx = ctx
	con.wg.Go(func() { con.sampleLoop(ctx) })
	srv := &http.Server{Handler: con.handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if err == nil {
		<-errc
	}
	con.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// sampleLoop samples the outbox every --sample, keeping the last hour.
func (con *console) sampleLoop(ctx context.Context) {
	tick := time.NewTicker(con.flags.sample)
	defer tick.Stop()
	for {
		if h, err := outboxHealth(ctx, con.db); err == nil {
			con.mu.Lock()
			now := time.Now()
			con.samples = append(con.samples, sample{At: now, Backlog: h.Backlog, AgeSec: h.oldestAge.Seconds()})
			for len(con.samples) > 0 && now.Sub(con.samples[0].At) > time.Hour {
				con.samples = con.samples[1:]
			}
			con.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// handler routes the pages and the API, behind access and CSRF checks.
func (con *console) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fsSub(webFS, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", con.loginPage)
	mux.HandleFunc("POST /login", con.login)
	// Each page is also JSON under /api.
	for _, rt := range []struct {
		method, path string
		h            func(http.ResponseWriter, *http.Request) error
	}{
		{"GET", "/{$}", con.dashboard},
		{"GET", "/parked", con.parked},
		{"GET", "/parked/aggregate", con.parkedAggregate},
		{"GET", "/early", con.early},
		{"POST", "/parked/replay", con.parkedReplay},
		{"POST", "/parked/discard", con.parkedDiscard},
		{"GET", "/outbox", con.outbox},
		{"POST", "/outbox/{verb}", con.outboxSet},
		{"GET", "/dead-letters", con.deadLetters},
		{"POST", "/dead-letters/{verb}", con.deadLettersMove},
		{"GET", "/probe", con.probePage},
		{"POST", "/probe", con.probeStart},
		{"GET", "/jobs/{id}", con.jobPage},
		{"GET", "/audit", con.auditPage},
	} {
		mux.HandleFunc(rt.method+" "+rt.path, con.wrap(rt.h))
		mux.HandleFunc(rt.method+" /api"+rt.path, con.wrap(rt.h))
	}
	return http.NewCrossOriginProtection().Handler(con.guard(mux))
}

// guard checks the token (when there is one), the CSRF token of every
// state-changing request, and the read-only mode.
func (con *console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if con.token == "" && !loopbackHost(r.Host) {
			// Without a token, only loopback names: a page of another site
			// whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing.
			http.Error(w, "forbidden: without --token the console answers only to a loopback host name", http.StatusForbidden)
			return
		}
		public := r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/")
		if con.token != "" && !public && !con.authorized(r) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				http.Error(w, "unauthorized: give Authorization: Bearer TOKEN", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.URL.Path != "/login" {
			if con.flags.readOnly {
				http.Error(w, "forbidden: this console is read-only (--read-only)", http.StatusForbidden)
				return
			}
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(con.csrf)) != 1 {
				http.Error(w, "forbidden: missing or wrong CSRF token (reload the page)", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names a loopback address.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (con *console) authorized(r *http.Request) bool {
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(b), []byte(con.token)) == 1
	}
	c, err := r.Cookie("wary_console")
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(con.session)) == 1
}

func (con *console) loginPage(w http.ResponseWriter, r *http.Request) {
	con.render(w, r, "login", http.StatusOK, nil)
}

func (con *console) login(w http.ResponseWriter, r *http.Request) {
	if con.token == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(con.token)) != 1 {
		con.render(w, r, "login", http.StatusUnauthorized, map[string]any{"Failed": true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: "wary_console", Value: con.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// who names the operator of a request: the console's user@host and the
// client's address.
func who(r *http.Request) string {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return operator() + " via console from " + host
}

// redactText is redact.String, for the templates.
func redactText(s string) string { return redact.String(s) }
