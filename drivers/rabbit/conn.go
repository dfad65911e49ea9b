package rabbit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
)

// ConnOptions configures a Conn. Nil means defaults.
type ConnOptions struct {
	// Config is passed to amqp.DialConfig for every (re)connection: TLS,
	// heartbeat, vhost, client properties. Its Recovery field must be nil:
	// the Conn owns reconnection. Default: amqp091-go's defaults (10s
	// heartbeat), a 10s dial timeout.
	Config *amqp.Config
	// Backoff paces reconnection attempts after the connection dropped.
	// Default: 100ms doubling to 5s.
	Backoff broker.Backoff
	// ReadyTimeout is how long an operation that needs the connection (a
	// publish, opening a consumer) waits for a dropped connection to come
	// back before it fails with a retryable error. Default: 10s.
	ReadyTimeout time.Duration
	// Logger receives reconnection events. Default: slog.Default().
	Logger *slog.Logger
}

// Conn is a connection to RabbitMQ that comes back when it drops: a
// goroutine redials with backoff until Close. Topics and subscriptions
// opened on it open their channels from whichever connection is current,
// so several of them share one TCP connection. A Conn is safe for
// concurrent use. Its String and GoString methods never show the password.
type Conn struct {
	url    string // secret: holds the password; never printed
	safe   string // redacted form, for errors and logs
	cfg    amqp.Config
	opts   ConnOptions
	logger *slog.Logger

	mu     sync.Mutex
	conn   *amqp.Connection // nil while reconnecting
	cork   *corkConn        // conn's network connection
	ready  chan struct{}    // closed while conn != nil
	gen    uint64           // successful dials
	ver    string           // the server's version property, "" if none
	frame  int              // negotiated frame_max (0: unlimited)
	closed bool
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Dial connects to the RabbitMQ server at rawURL (amqp:// or amqps://).
// The first connection is made before Dial returns, so a wrong address or
// credentials fail here; later drops are repaired in the background.
// Errors are classified as those of OpenTopic: wrong credentials or a
// vhost the user may not use match broker.ErrPermission, an unreachable
// server broker.ErrRetryable, a malformed URL or parameter value
// (heartbeat=soon) broker.ErrInvalid; none shows the password or the
// value. Dial reads the server's version (Conn.ServerVersion), which
// decides the default delivery limit of quorum queues.
func Dial(ctx context.Context, rawURL string, opts *ConnOptions) (*Conn, error) {
	var o ConnOptions
	if opts != nil {
		o = *opts
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff.Initial = 100 * time.Millisecond
	}
	if o.Backoff.Max <= 0 {
		o.Backoff.Max = 5 * time.Second
	}
	c := &Conn{url: rawURL, safe: redactURL(rawURL), opts: o, logger: o.Logger, ready: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if o.Config != nil {
		c.cfg = *o.Config
		if c.cfg.Recovery != nil {
			return nil, driver.Invalidf("rabbit: ConnOptions.Config.Recovery must be nil: the Conn reconnects by itself")
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if ambiguousURL(u) {
			// "amqp://guest:1234/pw@host/": a password holding "/" that
			// was not escaped reads as host "guest:1234" and vhost
			// "pw@host", which the server's errors would repeat; the
			// opaque "amqp:user:pass@host" is no AMQP URI.
			c.cancel()
			return nil, driver.Invalidf("rabbit: dial %s: not amqp://[user:pass@]host:port/vhost (percent-encode reserved characters of the user and password, and an \"@\" elsewhere)", c.safe)
		}
		// amqp091-go's errors for these echo the value and have no class.
		p := driver.NewURLParams(u)
		checkAMQPParams(p)
		for k := range u.Query() {
			p.Has(k) // amqp091-go ignores parameters it does not know
		}
		if err := p.Done(); err != nil {
			c.cancel()
			return nil, err
		}
	}
	if _, err := amqp.ParseURI(rawURL); err != nil {
		c.cancel()
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("rabbit: dial %s: %w", c.safe, c.scrub(err)))
	}
	conn, cork, err := c.dial(ctx)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.up(conn, cork)
	return c, nil
}

// String describes the connection without its password.
func (c *Conn) String() string { return "rabbit.Conn(" + c.safe + ")" }

// GoString is String, so that %#v does not print the Conn's fields (its
// URL holds the password).
func (c *Conn) GoString() string { return "&" + c.String() }

func (c *Conn) dial(ctx context.Context) (*amqp.Connection, *corkConn, error) {
	cfg := c.cfg
	// DialConfig calls cfg.Dial on this goroutine: no lock needed.
	var stop func() bool
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = func(network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake must not outlast the dial timeout, nor ctx;
			// amqp091-go clears the deadline once the connection is open.
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
			return conn, nil
		}
	}
	// Publishes gather their writes under amqp091-go's (corkConn).
	var cork *corkConn
	dial := cfg.Dial
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		conn, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		cork = &corkConn{Conn: conn}
		return cork, nil
	}
	if cfg.Properties == nil {
		cfg.Properties = amqp.NewConnectionProperties()
		cfg.Properties.SetClientConnectionName("wary")
	}
	conn, err := amqp.DialConfig(c.url, cfg)
	if stop != nil && !stop() && err == nil {
		// ctx ended as the handshake finished: the deadline may hit the
		// open connection. Do not use it.
		_ = conn.Close()
		return nil, nil, ctx.Err()
	}
	if err != nil {
		// amqp091-go's URI errors do not echo the URL; net errors carry
		// only host and port. Say which server, without the password.
		// Classified as through OpenTopic: a refused login is
		// ErrPermission, an unreachable server ErrRetryable.
		return nil, nil, driver.OpenError(code(err), fmt.Errorf("rabbit: dial %s: %w", c.safe, c.scrub(err)))
	}
	return conn, cork, nil
}

// up installs conn as the current connection and watches it.
func (c *Conn) up(conn *amqp.Connection, cork *corkConn) {
	notify := conn.NotifyClose(make(chan *amqp.Error, 1))
	ver := ""
	switch v := conn.Properties["version"].(type) {
	case string:
		ver = v
	case []byte:
		ver = string(v)
	}
	c.mu.Lock()
	c.conn = conn
	c.cork = cork
	c.ver = ver
	c.frame = max(conn.Config.FrameSize, 0)
	c.gen++
	close(c.ready)
	c.mu.Unlock()
	c.wg.Add(1)
	go c.watch(conn, notify)
}

// watch waits for conn to drop, then redials until it succeeds or the Conn
// is closed.
func (c *Conn) watch(conn *amqp.Connection, notify chan *amqp.Error) {
	defer c.wg.Done()
	var reason *amqp.Error
	select {
	case reason = <-notify:
	case <-c.ctx.Done():
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.conn, c.cork = nil, nil
	c.ready = make(chan struct{})
	c.mu.Unlock()
	c.logger.Warn("wary/rabbit: connection lost, reconnecting", slog.String("server", c.safe), slog.Any("reason", reason))
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(c.opts.Backoff.Delay(attempt))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, cork, err := c.dial(c.ctx)
		if err != nil {
			c.logger.Warn("wary/rabbit: reconnect failed", slog.Int("attempt", attempt), slog.String("error", err.Error()))
			continue
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			_ = next.Close()
			return
		}
		c.mu.Unlock()
		c.logger.Info("wary/rabbit: reconnected", slog.String("server", c.safe), slog.Int("attempts", attempt))
		c.up(next, cork)
		return
	}
}

// current returns the connection, waiting up to ReadyTimeout (or ctx) for
// it to come back if it is down.
func (c *Conn) current(ctx context.Context) (*amqp.Connection, uint64, error) {
	var timer *time.Timer
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, 0, errClosed
		}
		conn, gen, ready := c.conn, c.gen, c.ready
		c.mu.Unlock()
		if conn != nil && !conn.IsClosed() {
			return conn, gen, nil
		}
		if conn != nil {
			// Closed, but the watcher has not noticed yet: wait for it.
			ready = nil
		}
		if timer == nil {
			timer = time.NewTimer(c.opts.ReadyTimeout)
			defer timer.Stop()
		}
		poll := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ready:
		case <-poll.C:
		case <-ctx.Done():
			poll.Stop()
			return nil, 0, ctx.Err()
		case <-c.ctx.Done():
			poll.Stop()
			return nil, 0, errClosed
		case <-timer.C:
			poll.Stop()
			return nil, 0, errNotReady
		}
		poll.Stop()
	}
}

// channel opens a channel on the current connection.
func (c *Conn) channel(ctx context.Context) (*amqp.Channel, error) {
	ch, _, err := c.channelFrame(ctx)
	return ch, err
}

// channelFrame opens a channel on the current connection and returns the
// connection's negotiated frame_max (0: unlimited).
func (c *Conn) channelFrame(ctx context.Context) (*amqp.Channel, int, error) {
	ch, frame, _, err := c.channelCork(ctx)
	return ch, frame, err
}

// channelCork is channelFrame, and the connection's corkConn (nil if the
// connection changed meanwhile: its publishes are then not gathered).
func (c *Conn) channelCork(ctx context.Context) (*amqp.Channel, int, *corkConn, error) {
	conn, _, err := c.current(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, 0, nil, err
	}
	var cork *corkConn
	c.mu.Lock()
	if c.conn == conn {
		cork = c.cork
	}
	c.mu.Unlock()
	return ch, max(conn.Config.FrameSize, 0), cork, nil
}

// FrameMax returns the frame_max negotiated with the server on the current
// (or last) connection, in bytes (0: unlimited). A message's properties and
// headers travel in one frame, so it bounds them: capability.Topic.MaxHeaderSize
// is derived from it.
func (c *Conn) FrameMax() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frame
}

// Reconnects returns how many times the Conn reconnected after its
// connection dropped.
func (c *Conn) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.gen) - 1
}

// ServerVersion returns the RabbitMQ version the server reported when the
// current (or last) connection opened, "" if it reported none. It decides
// the delivery limit a quorum queue has by default (see the package doc).
func (c *Conn) ServerVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ver
}

func (c *Conn) version() serverVersion { return parseVersion(c.ServerVersion()) }

// Connection returns the current amqp091-go connection, or nil while the
// Conn is reconnecting. Do not close it: Close the Conn.
func (c *Conn) Connection() *amqp.Connection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// Close closes the connection and stops reconnecting. Topics and
// subscriptions opened on the Conn fail with ErrClosed afterwards; close
// them first. Closing twice returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conn := c.conn
	c.conn = nil
	c.cancel()
	c.mu.Unlock()
	var err error
	if conn != nil && !conn.IsClosed() {
		err = conn.Close()
		if errors.Is(err, amqp.ErrClosed) {
			err = nil
		}
	}
	c.wg.Wait()
	return err
}

// withChannel runs f on a short-lived channel (for declarations, whose
// failures close the channel they run on).
func (c *Conn) withChannel(ctx context.Context, f func(ch *amqp.Channel) error) error {
	ch, err := c.channel(ctx)
	if err != nil {
		return err
	}
	err = f(ch)
	if cerr := ch.Close(); err == nil && cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
		err = cerr
	}
	return err
}

// scrub makes sure err's text does not hold the password: url.Parse errors
// quote the whole URL, and their inner error the part that failed (a
// port, an escape), which may be a piece of a password; strconv's quote
// the number.
func (c *Conn) scrub(err error) error {
	var ue *url.Error
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ue):
		return errors.New("invalid URL: " + quotedText.ReplaceAllString(ue.Err.Error(), `"…"`))
	case errors.As(err, &ne):
		return errors.New("invalid number in the URL: " + ne.Err.Error())
	}
	if u, perr := url.Parse(c.url); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(err.Error(), pw) {
			return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
		}
	}
	return err
}

// quotedText matches a quoted string in an error's text.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactURL renders an AMQP URL without its password. A URL that does not
// parse, or whose "@" does not end a parsed userinfo (a password holding
// "/", "?" or "#" that was not escaped), shows only its scheme: which part
// of it is the password cannot be told.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err == nil && !ambiguousURL(u) {
		return redact.URL(u)
	}
	if err == nil && u.Opaque != "" && u.Scheme != "" {
		return u.Scheme + ":" + redactedText
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || strings.ContainsFunc(scheme, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')
	}) {
		return "(unparsable URL)"
	}
	return scheme + "://" + redactedText
}

const redactedText = "xxxxx"
