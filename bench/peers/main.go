// Command peers measures, end to end, how fast events committed by
// producers in PostgreSQL reach a consumer of a RabbitMQ quorum queue
// through wary's outbox relay (polling, and streaming from the WAL),
// through Watermill's forwarder (watermill-sql outbox, watermill-amqp
// publisher with confirms), and, as the broker's ceiling, how fast raw
// amqp091-go publishes as many messages with 256 confirms in flight; and,
// as the producers' floor, how fast they commit the same transactions
// without the outbox; and, as the end to end ceiling, the floor's
// transactions with each one's events published raw once it committed
// (no outbox, no relay). Runs are interleaved round by round; it prints every
// run (with PostgreSQL's CPU per event when the server is on this
// machine), each round's ratios, and then a Markdown table of medians.
// With -store mysql it instead drains a backlog committed to a MySQL or
// MariaDB outbox: wary's relay on idem/mysql, Watermill's forwarder on a
// watermill-sql MySQL topic, and raw. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	cfg := Config{}
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	flag.IntVar(&cfg.Events, "events", 10000, "events per wary and raw run")
	flag.IntVar(&cfg.WatermillEvents, "watermill-events", 0, "events per Watermill run (0: -events)")
	flag.IntVar(&cfg.Producers, "producers", 8, "concurrent producer goroutines")
	flag.IntVar(&cfg.RelayBatch, "relay-batch", 0, "wary relay BatchSize (0: default, 500)")
	flag.IntVar(&cfg.RelayPipeline, "relay-pipeline", 0, "wary relay Pipeline (0: default, 2)")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "limit for one run")
	flag.StringVar(&cfg.PostgresURL, "pg", env("WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL")
	flag.StringVar(&cfg.RabbitURL, "amqp", env("WARY_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL")
	flag.StringVar(&cfg.MySQLDSN, "mysql", env("WARY_MYSQL_URL", "root@tcp(127.0.0.1:3306)/test"), "MySQL or MariaDB DSN (-store mysql)")
	store := flag.String("store", "postgres", "postgres: producers and relays on PostgreSQL; mysql: a backlog drained from MySQL/MariaDB")
	only := flag.String("only", "", "run only the scenarios whose name contains this")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the sitting to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	run := sitting
	switch *store {
	case "postgres":
	case "mysql":
		run = mysqlSitting
	default:
		fmt.Fprintf(os.Stderr, "peers: -store %q: want postgres or mysql\n", *store)
		os.Exit(2)
	}
	if err := run(context.Background(), os.Stdout, cfg, *rounds, *only); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// sitting runs rounds interleaved rounds of the scenarios and writes every
// run and the table of medians to w.
func sitting(ctx context.Context, w io.Writer, cfg Config, rounds int, only string) error {
	s, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	var scs []Scenario
	for _, sc := range Scenarios() {
		if strings.Contains(sc.Name(), only) {
			scs = append(scs, sc)
		}
	}
	fmt.Fprintf(w, "# %s, load %s; %d events per run (Watermill %d), %d producers, %d rounds\n",
		time.Now().UTC().Format(time.DateTime), loadavg(), s.cfg.Events, s.cfg.WatermillEvents, s.cfg.Producers, rounds)
	if s.cpu == nil {
		fmt.Fprintf(w, "# PostgreSQL CPU: n/a (%v)\n", s.noCPU)
	}
	results := make(map[Scenario][]Result)
	for r := range rounds {
		// Rotate the order each round so that no contender always runs
		// first (on a fresher machine) or last.
		order := append(slices.Clone(scs[r%len(scs):]), scs[:r%len(scs)]...)
		for _, sc := range order {
			res, err := s.Run(ctx, sc)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, sc.Name(), err)
			}
			results[sc] = append(results[sc], res)
			fmt.Fprintf(w, "# round %d  %-45s %7.0f msgs/s  commits %7.0f ev/s  tail %6.0f ms  cpu µs/ev: pg %s go %s rabbitmq %s  oldest xact %5.1f s  load %s\n",
				r+1, sc.Name(), res.Rate(), res.CommitRate(), ms(res.Tail()), cpuText(res.CPUPerEvent()), cpuText(res.GoCPUPerEvent()),
				cpuText(res.BrokerCPUPerEvent()), res.OldestXact.Seconds(), loadavg())
			if res.PgSplit != nil {
				fmt.Fprintf(w, "#          pg cpu by process: %s\n", splitText(res))
			}
			if res.Relay != "" {
				fmt.Fprintf(w, "#          relay: %s\n", res.Relay)
			}
		}
		for _, sc := range scs {
			if c := sc.Contender; c == "wary" || c == "stream" || c == "decode" || c == "least" || c == "ceiling" {
				fmt.Fprintf(w, "# round %d  %-45s %s\n", r+1, sc.Name(), ratios(sc, results, r))
			}
		}
	}
	table(w, scs, results)
	return nil
}

// ratios are wary row sc's ratios in round r (0-based) to the floor's
// commit rate and Watermill at the same transaction size and to raw, for
// those that ran.
func ratios(sc Scenario, results map[Scenario][]Result, r int) string {
	rate := results[sc][r].Rate()
	var out []string
	if f := results[Scenario{"floor", sc.PerTx, 0}]; len(f) > r {
		out = append(out, fmt.Sprintf("%.0f%% of the floor", 100*rate/f[r].CommitRate()))
	}
	if wm := results[Scenario{"watermill", sc.PerTx, 100}]; len(wm) > r {
		out = append(out, fmt.Sprintf("%.1f× Watermill", rate/wm[r].Rate()))
	}
	if raw := results[Scenario{Contender: "raw"}]; len(raw) > r {
		out = append(out, fmt.Sprintf("%.0f%% of raw", 100*rate/raw[r].Rate()))
	}
	if sc.Contender != "ceiling" {
		if c := results[Scenario{"ceiling", sc.PerTx, 0}]; len(c) > r {
			out = append(out, fmt.Sprintf("%.0f%% of the ceiling", 100*rate/c[r].Rate()))
		}
	}
	if sc.Contender == "stream" {
		if d := results[Scenario{"decode", sc.PerTx, sc.Aggs}]; len(d) > r {
			out = append(out, fmt.Sprintf("%.0f%% of decode + raw", 100*rate/d[r].Rate()))
		}
	}
	if c := sc.Contender; c == "stream" || c == "decode" {
		if l := results[Scenario{"least", sc.PerTx, 0}]; len(l) > r {
			out = append(out, fmt.Sprintf("%.0f%% of least row + decode + raw", 100*rate/l[r].Rate()))
		}
	}
	return strings.Join(out, ", ")
}

// medianCPU is the median of per over the results where it is known, as
// cpuText formats it.
func medianCPU(rs []Result, per func(Result) float64) string {
	known := slices.DeleteFunc(slices.Clone(rs), func(r Result) bool { return per(r) < 0 })
	if len(known) == 0 {
		return "n/a"
	}
	return cpuText(median(known, per))
}

// cpuText formats µs of CPU per event ("n/a" when unknown).
func cpuText(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", us)
}

// table writes the Markdown table: median msgs/s (range), the producers'
// commit rate, the tail after the last commit, the CPU per event of
// PostgreSQL, of this process and of RabbitMQ,
// and per-round ratios of each wary row to the floor's commit rate and
// Watermill at the same transaction size and to raw.
func table(w io.Writer, scs []Scenario, results map[Scenario][]Result) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | msgs/s, median (min–max) | producers' commits, events/s | last commit → all received, ms | CPU µs/event: PostgreSQL / Go process / RabbitMQ | vs floor | vs Watermill | vs raw |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	raw := results[Scenario{Contender: "raw"}]
	for _, sc := range scs {
		rs := results[sc]
		rate := median(rs, Result.Rate)
		lo, hi := minmax(rs, Result.Rate)
		commits, tail := "–", "–"
		if sc.Contender != "raw" {
			commits = fmt.Sprintf("%.0f", median(rs, Result.CommitRate))
		}
		if sc.outbox() {
			tail = fmt.Sprintf("%.0f", median(rs, func(r Result) float64 { return ms(r.Tail()) }))
		}
		cpu := medianCPU(rs, Result.CPUPerEvent) + " / " + medianCPU(rs, Result.GoCPUPerEvent) + " / " + medianCPU(rs, Result.BrokerCPUPerEvent)
		vsF, vsW, vsR := "–", "–", "–"
		if c := sc.Contender; c == "wary" || c == "stream" || c == "decode" || c == "least" || c == "ceiling" {
			if f := results[Scenario{"floor", sc.PerTx, 0}]; len(f) > 0 {
				vsF = fmt.Sprintf("%.0f%%", 100*ratio(rs, f, Result.CommitRate))
			}
			if wm := results[Scenario{"watermill", sc.PerTx, 100}]; len(wm) > 0 {
				vsW = fmt.Sprintf("%.1f×", ratio(rs, wm, Result.Rate))
			}
			if len(raw) > 0 {
				vsR = fmt.Sprintf("%.0f%%", 100*ratio(rs, raw, Result.Rate))
			}
		}
		fmt.Fprintf(w, "| %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s |\n", sc.Name(), num(rate), num(lo), num(hi), commits, tail, cpu, vsF, vsW, vsR)
	}
}

// ratio is the median over rounds of a's rate over b's (by of b) in the
// same round.
func ratio(a, b []Result, by func(Result) float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		rs = append(rs, a[i].Rate()/by(b[i]))
	}
	return med(rs)
}

func median(rs []Result, f func(Result) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return med(xs)
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func minmax(rs []Result, f func(Result) float64) (float64, float64) {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// num formats a rate with thousands separators.
func num(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// loadavg is the 1-minute load average (from /proc/loadavg, or uptime).
func loadavg() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			return f[0]
		}
	}
	out, _ := exec.Command("uptime").Output()
	return strings.TrimSpace(string(out))
}

// splitText is a run's PostgreSQL CPU per event by kind of process.
func splitText(r Result) string {
	var parts []string
	for _, k := range []string{"client", "walsender", "autovacuum", "other"} {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, float64(r.PgSplit[k])/float64(time.Microsecond)/float64(r.Events)))
	}
	return strings.Join(parts, ", ") + " µs/ev"
}
