package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/jackc/pgx/v5"
)

// The store workload (-only store; docs/fleet.md "Measured"): the fleet's
// store on the PostgreSQL that -postgres names (scripts/bench-store starts
// one for the run, on a local unix socket with fsync on), against the disk
// store (badger) of one host, in one run.
//   - turn-end acknowledgement: a turn written and flushed, as the record
//     does before it forwards the response that ends the turn, one after
//     another; p50 and p99, and what PostgreSQL adds to the p99, <= 5 ms;
//   - appends per second with 100 sessions each writing and flushing turns
//     at once;
//   - `sessions` on 10 000 sessions with 1 000 000 turns, < 1 s (PostgreSQL
//     only: the rows are made with SQL, in seconds);
//   - the recording workload with --store on PostgreSQL, against the same
//     sidecar with --record=false, >= 0.9x.
//
// It needs a PostgreSQL, so it runs only when -only names it. The binary
// starts none itself: the throwaway server the tests start (state/pgtest)
// is test code, and stays out of the release build.

const (
	targetStoreAckP99 = 5.0 // ms PostgreSQL adds to badger's p99 turn-end acknowledgement, at most
	targetStoreList   = 1.0 // seconds `sessions` takes on the big store, under
)

// storeResult is what the store workload measured, indexed like the
// relays: [sidecarRelay] is PostgreSQL, [byteCopyRelay] badger.
type storeResult struct {
	ackP50, ackP99 [2]time.Duration
	appends        [2]float64 // turns a second
	listing        time.Duration
	listSessions   int
	listTurns      int
	rec            [2]tputResult // recording on PostgreSQL: [sidecarRelay] on, [byteCopyRelay] off
}

const (
	storeAcks     = 1000 // sequential acknowledged turns per store
	storeWriters  = 100  // sessions writing at once
	storeEach     = 20   // turns each of them writes
	storeSessions = 10_000
	storeTurns    = 100 // turns per session of the big store: 1 000 000 in all
)

func (r *runner) storeWorkload(ctx context.Context, o options, progress io.Writer) (*storeResult, error) {
	srv, err := newPGServer(o.postgres)
	if err != nil {
		return nil, err
	}
	defer srv.dropAll(ctx) // the measurement is done; what is left of a database is logged
	var res storeResult
	opens := [2]func(name string) (state.Store, error){
		sidecarRelay: func(name string) (state.Store, error) {
			dsn, err := srv.CreateDB(ctx, name)
			if err != nil {
				return nil, err
			}
			return state.OpenPostgres(ctx, dsn, state.Options{}, state.PostgresOptions{})
		},
		byteCopyRelay: func(name string) (state.Store, error) {
			return state.Open(ctx, filepath.Join(r.dir, "store-"+name), state.Options{})
		},
	}
	for k, open := range opens {
		st, err := open(fmt.Sprintf("acks%d", k))
		if err != nil {
			return nil, fmt.Errorf("store: open: %w", err)
		}
		lat, err := acks(ctx, st, storeAcks)
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("store: acknowledgements: %w", err)
		}
		res.ackP50[k], res.ackP99[k] = quantile(lat, 0.50), quantile(lat, 0.99)

		if st, err = open(fmt.Sprintf("appends%d", k)); err != nil {
			return nil, fmt.Errorf("store: open: %w", err)
		}
		rate, err := appends(ctx, st, storeWriters, storeEach)
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("store: appends: %w", err)
		}
		res.appends[k] = rate
	}
	fmt.Fprintf(progress, "bench: store: turn-end acknowledgement p99 %s on PostgreSQL, %s on badger; %.0f and %.0f appends/s\n",
		res.ackP99[sidecarRelay].Round(10*time.Microsecond), res.ackP99[byteCopyRelay].Round(10*time.Microsecond), res.appends[sidecarRelay], res.appends[byteCopyRelay])

	recURL, err := srv.CreateDB(ctx, "recording")
	if err != nil {
		return nil, err
	}
	rec := *r
	rec.extra = append(append([]string(nil), r.extra...), "--store", recURL)
	if res.rec, err = rec.recordingRound(ctx, []relayKind{byteCopyRelay, sidecarRelay}, o.recordRuns, o.recordN, o.smallSize); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// Last: filling the big store leaves PostgreSQL busy (autovacuum, a
	// checkpoint) for a while after.
	if res.listing, res.listSessions, res.listTurns, err = bigListing(ctx, srv); err != nil {
		return nil, fmt.Errorf("store: listing: %w", err)
	}
	fmt.Fprintf(progress, "bench: store: sessions on %d sessions with %d turns in %s\n", res.listSessions, res.listTurns, res.listing.Round(time.Millisecond))

	return &res, nil
}

// benchTurn is a short completed turn, as the record writes one.
func benchTurn(i int) *state.Turn {
	now := time.Now()
	return &state.Turn{Index: i, PromptText: "a prompt of a few words", Answer: "an answer of a few more words than the prompt",
		StopReason: "end_turn", Status: state.TurnCompleted, Started: now, Ended: now}
}

// acks writes n turns one after another, each flushed before the next, and
// returns each one's time to acknowledgement.
func acks(ctx context.Context, st state.Store, n int) ([]time.Duration, error) {
	if err := st.PutSession(ctx, &state.Session{ClientID: "ack", Cwd: "/tmp", Created: time.Now(), Updated: time.Now()}); err != nil {
		return nil, err
	}
	if err := st.Flush(ctx); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		start := time.Now()
		if err := st.PutTurn(ctx, "ack", benchTurn(i)); err != nil {
			return nil, err
		}
		if err := st.Flush(ctx); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// appends has writers sessions write each turns at once, every turn
// flushed as a turn's end is, and returns the turns written a second.
func appends(ctx context.Context, st state.Store, writers, each int) (float64, error) {
	for w := range writers {
		if err := st.PutSession(ctx, &state.Session{ClientID: fmt.Sprintf("w%d", w), Created: time.Now(), Updated: time.Now()}); err != nil {
			return 0, err
		}
	}
	if err := st.Flush(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := 1; i <= each; i++ {
				if err := st.PutTurn(ctx, fmt.Sprintf("w%d", w), benchTurn(i)); err != nil {
					errs <- err
					return
				}
				if err := st.Flush(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return perSecond(float64(writers*each), time.Since(start)), nil
}

// bigListing fills a database with storeSessions sessions of storeTurns
// turns each, with SQL, and times `sessions` (Store.Sessions) on it: the
// median of three.
func bigListing(ctx context.Context, srv *pgServer) (time.Duration, int, int, error) {
	dsn, err := srv.CreateDB(ctx, "listing")
	if err != nil {
		return 0, 0, 0, err
	}
	st, err := state.OpenPostgres(ctx, dsn, state.Options{}, state.PostgresOptions{}) // migrates the new database
	if err != nil {
		return 0, 0, 0, err
	}
	defer st.Close() // read only: nothing to land
	rec, err := json.Marshal(state.Session{Agent: []string{"claude-agent-acp"}, AgentName: "claude", Cwd: "/home/me/project"})
	if err != nil {
		return 0, 0, 0, err
	}
	turn, err := json.Marshal(benchTurn(1))
	if err != nil {
		return 0, 0, 0, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO acp_sidecar.sessions (client_id, record, updated, turns_kept, last_activity)
		SELECT 'big-' || i, $1::json, now() - make_interval(secs => i), $3, now() - make_interval(secs => i)
		FROM generate_series(1, $2) AS i`, rec, storeSessions, storeTurns); err != nil {
		return 0, 0, 0, fmt.Errorf("make the sessions: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO acp_sidecar.turns (client_id, idx, status, record)
		SELECT 'big-' || s, t, 'completed', $1::json FROM generate_series(1, $2) AS s, generate_series(1, $3) AS t`,
		turn, storeSessions, storeTurns); err != nil {
		return 0, 0, 0, fmt.Errorf("make the turns: %w", err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return 0, 0, 0, err
	}
	var times []float64
	n := 0
	for range 3 {
		start := time.Now()
		list, err := st.Sessions(ctx)
		if err != nil {
			return 0, 0, 0, err
		}
		times = append(times, float64(time.Since(start)))
		n = len(list)
	}
	return time.Duration(median(times)), n, storeSessions * storeTurns, nil
}

// storeMetrics are the store workload's rows of the report.
func storeMetrics(s *storeResult) []Metric {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pair := func(name, unit string, v [2]float64) Metric {
		m := Metric{Name: name, Unit: unit, Sidecar: v[sidecarRelay], ByteCopy: v[byteCopyRelay], Added: v[sidecarRelay] - v[byteCopyRelay]}
		if m.ByteCopy != 0 {
			m.Ratio = m.Sidecar / m.ByteCopy
		}
		return m
	}
	p50 := pair("store_ack_p50", "ms", [2]float64{ms(s.ackP50[0]), ms(s.ackP50[1])})
	p99 := pair("store_ack_p99", "ms", [2]float64{ms(s.ackP99[0]), ms(s.ackP99[1])})
	p99.Target = fmt.Sprintf("added <= %g ms", targetStoreAckP99)
	p99.Pass = verdict(p99.Added <= targetStoreAckP99)
	app := pair(fmt.Sprintf("store_appends_%d_sessions", storeWriters), "turns/s", s.appends)
	list := Metric{Name: fmt.Sprintf("store_sessions_%d", s.listSessions), Unit: "ms", Sidecar: ms(s.listing),
		Target: fmt.Sprintf("< %g s (%d turns)", targetStoreList, s.listTurns)}
	list.Pass = verdict(s.listing.Seconds() < targetStoreList)
	rec := pair("store_recording_throughput", "frames/s", [2]float64{
		perSecond(float64(s.rec[sidecarRelay].frames), s.rec[sidecarRelay].elapsed),
		perSecond(float64(s.rec[byteCopyRelay].frames), s.rec[byteCopyRelay].elapsed),
	})
	rec.Target = fmt.Sprintf(">= %.2fx --record=false", targetRecording)
	rec.Pass = verdict(rec.Ratio >= targetRecording)
	return []Metric{p50, p99, app, list, rec}
}

// pgServer is the PostgreSQL the store workload measures on (-postgres):
// it makes a database of its own for each measurement, and drops them all
// at the end.
type pgServer struct {
	base    *url.URL // the server, as -postgres gave it
	prefix  string   // what the run's databases are named with
	made    []string
	dropErr io.Writer
}

// newPGServer reads -postgres, a postgres:// URL of a server the user may
// create databases in.
func newPGServer(dsn string) (*pgServer, error) {
	if dsn == "" {
		return nil, fmt.Errorf("the store workload needs -postgres URL, a PostgreSQL server it may create databases in (scripts/bench-store starts one for the run)")
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// Not echoed: a key=value string may hold a password.
		return nil, fmt.Errorf("-postgres: want a postgres:// URL")
	}
	return &pgServer{base: u, prefix: fmt.Sprintf("acp_sidecar_bench_%d_", os.Getpid()), dropErr: os.Stderr}, nil
}

// url is the server's URL with database db, the form --store takes.
func (s *pgServer) url(db string) string {
	u := *s.base
	u.Path = "/" + db
	return u.String()
}

// CreateDB makes an empty database for one measurement and returns its URL.
func (s *pgServer) CreateDB(ctx context.Context, name string) (string, error) {
	name = s.prefix + name
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return "", fmt.Errorf("store: connect to -postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("store: create database %s: %w", name, err)
	}
	s.made = append(s.made, name)
	return s.url(name), nil
}

// dropAll drops the databases CreateDB made, and says on stderr which it
// could not.
func (s *pgServer) dropAll(ctx context.Context) {
	if len(s.made) == 0 {
		return
	}
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		fmt.Fprintf(s.dropErr, "bench: the store workload's databases %v are left: %v\n", s.made, err)
		return
	}
	defer conn.Close(ctx)
	for _, name := range s.made {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(s.dropErr, "bench: the store workload's database %s is left: %v\n", name, err)
		}
	}
}
