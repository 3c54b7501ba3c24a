// Package sandbox is CommitLayer's test enterprise: seven systems of record
// (sandbox/systems) with their SQLite files, served over real HTTP on one
// loopback listener, a virtual clock, a deterministic seed and an operator
// who acts beside the agent. The chaos transport, scripted agent, extractor
// and oracle live in the sub-packages.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// System names, in a fixed order.
var Systems = systems.Names

// ClockOffset is how far in the past an enterprise's clock starts: far
// enough that a 10-minute settlement window has closed when a scenario is
// verified.
const ClockOffset = 20 * time.Minute

// Options configure New.
type Options struct {
	// Seed is the initial state; nil means DefaultSeed().
	Seed *Seed
	// Payments builds the payments backend over the payments system's file;
	// nil means the SQLite fake.
	Payments func(sys *systems.System) systems.PaymentsBackend
	// Now is the real time the clock is placed against; nil means time.Now.
	Now func() time.Time
}

// Enterprise is one sandbox enterprise: seven systems over HTTP.
type Enterprise struct {
	dir   string
	clock *systems.Clock
	sys   map[string]*systems.System

	payments *systems.PaymentsSystem
	orders   *systems.OrdersSystem
	crm      *systems.CRMSystem
	tickets  *systems.TicketsSystem
	ledger   *systems.LedgerSystem
	platform *systems.PlatformSystem
	broker   *systems.BrokerSystem

	handler http.Handler
	// inflight is held shared by every request being served and taken
	// exclusively by Close, which so waits for them before closing files.
	inflight sync.RWMutex
	closed   bool
	srv      *http.Server
	ln       net.Listener
	served   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

func dbPath(dir, system string) string { return filepath.Join(dir, system+".db") }

// New creates an enterprise in dir: seven SQLite files, seeded, served on
// 127.0.0.1 on a free port. dir must exist and hold none of the files.
func New(ctx context.Context, dir string, opts Options) (*Enterprise, error) {
	seed := opts.Seed
	if seed == nil {
		d := DefaultSeed()
		seed = &d
	}
	if err := seed.Validate(); err != nil {
		return nil, fmt.Errorf("new enterprise: %w", err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	start := now().Add(-ClockOffset)
	clock := systems.NewClock(start, start)

	e := &Enterprise{dir: dir, clock: clock, sys: make(map[string]*systems.System, len(Systems))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(Systems))
	for i, name := range Systems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := systems.Create(ctx, name, dbPath(dir, name), clock)
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			e.sys[name] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.closeDBs()
		return nil, fmt.Errorf("new enterprise: %w", err)
	}
	e.build(opts.Payments)
	if err := e.seed(ctx, seed); err != nil {
		e.closeDBs()
		return nil, fmt.Errorf("new enterprise: %w", err)
	}
	if err := e.serve(); err != nil {
		e.closeDBs()
		return nil, fmt.Errorf("new enterprise: %w", err)
	}
	return e, nil
}

func (e *Enterprise) build(payments func(*systems.System) systems.PaymentsBackend) {
	var backend systems.PaymentsBackend
	if payments != nil {
		backend = payments(e.sys[systems.Payments])
	}
	e.payments = systems.NewPayments(e.sys[systems.Payments], backend)
	e.orders = systems.NewOrders(e.sys[systems.Orders])
	e.crm = systems.NewCRM(e.sys[systems.CRM])
	e.tickets = systems.NewTickets(e.sys[systems.Tickets])
	e.ledger = systems.NewLedger(e.sys[systems.Ledger])
	e.platform = systems.NewPlatform(e.sys[systems.Platform])
	e.broker = systems.NewBroker(e.sys[systems.Broker])
	e.handler = systems.Handler(e.payments, e.orders, e.crm, e.tickets, e.ledger, e.platform, e.broker)
}

// seed writes the seed. Seeded records are stamped one second apart from an
// hour before the clock's start, system after system in a fixed order, so
// every enterprise has the same events in the same order.
func (e *Enterprise) seed(ctx context.Context, s *Seed) error {
	st := systems.NewSeeder(e.clock.Start().Add(-time.Hour))
	if err := e.crm.Seed(ctx, st, s.Customers, s.Subscriptions); err != nil {
		return err
	}
	if err := e.orders.Seed(ctx, st, s.Orders); err != nil {
		return err
	}
	var charges []systems.SeedCharge
	for _, o := range s.Orders {
		if o.Status == "paid" || o.Status == "shipped" {
			charges = append(charges, systems.SeedCharge{OrderID: o.ID, Amount: o.Total, Currency: o.Currency})
		}
	}
	billing := make([]systems.SeedBilling, 0, len(s.Subscriptions))
	for _, sub := range s.Subscriptions {
		billing = append(billing, systems.SeedBilling{SubscriptionID: sub.ID, Active: sub.Status == "active"})
	}
	if err := e.payments.Seed(ctx, st, charges, billing); err != nil {
		return err
	}
	if err := e.tickets.Seed(ctx, st, s.Tickets); err != nil {
		return err
	}
	if err := e.ledger.Seed(ctx, st, s.Accounts); err != nil {
		return err
	}
	if err := e.platform.Seed(ctx, st, s.Services); err != nil {
		return err
	}
	return e.broker.Seed(ctx, st, s.Products)
}

func (e *Enterprise) serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	e.ln = ln
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	e.served = make(chan struct{})
	go func() {
		defer close(e.served)
		e.srv.Serve(ln)
	}()
	return nil
}

func (e *Enterprise) serveHTTP(w http.ResponseWriter, r *http.Request) {
	e.inflight.RLock()
	defer e.inflight.RUnlock()
	if e.closed {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"closed","message":"the enterprise is closed"}}` + "\n"))
		return
	}
	e.handler.ServeHTTP(w, r)
}

// URL is the base URL of the systems: "http://127.0.0.1:PORT"; system paths
// are under it ("/payments/refunds").
func (e *Enterprise) URL() string { return "http://" + e.ln.Addr().String() }

// SystemURL is the base URL of one system ("http://127.0.0.1:PORT/payments"),
// the http_events connector's base.
func (e *Enterprise) SystemURL(system string) string { return e.URL() + "/" + system }

// Handler serves the seven systems in process (the same routes as URL).
func (e *Enterprise) Handler() http.Handler { return http.HandlerFunc(e.serveHTTP) }

// Clock is the enterprise's virtual clock.
func (e *Enterprise) Clock() *systems.Clock { return e.clock }

// Dir is the directory holding the files.
func (e *Enterprise) Dir() string { return e.dir }

// DBPath is the SQLite file of a system ("" for an unknown system).
func (e *Enterprise) DBPath(system string) string {
	if _, ok := e.sys[system]; !ok {
		return ""
	}
	return dbPath(e.dir, system)
}

// Operator acts in the enterprise beside the agent: a concurrent human, or an
// event after settlement.
func (e *Enterprise) Operator() *Operator { return &Operator{e: e} }

// Close stops serving and closes the files. It is safe to call twice.
func (e *Enterprise) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		if e.srv != nil {
			// Close, not Shutdown: Shutdown waits up to 5 s for connections a
			// client dialled and never used. Requests being served finish
			// before the files close.
			e.srv.Close()
			<-e.served
		}
		e.inflight.Lock()
		e.closed = true
		e.inflight.Unlock()
		if err := e.closeDBs(); err != nil {
			errs = append(errs, fmt.Errorf("close enterprise: %w", err))
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

func (e *Enterprise) closeDBs() error {
	var errs []error
	for _, s := range e.sys {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
