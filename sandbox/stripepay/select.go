package stripepay

import (
	"fmt"
	"log/slog"

	"github.com/commitlayer/commitlayer/sandbox/stripefake"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Names lists the values of --payments / "payments".
var Names = []string{NameSandbox, NameStripe, NameStripeFake}

// Selection is the payments backend a run uses.
type Selection struct {
	// Name is what results carry in payments_backend.
	Name string
	// Payments is for sandbox.Options.Payments; nil for the SQLite fake.
	Payments func(sys *systems.System) systems.PaymentsBackend
	// Notice is what the run says up front ("" for the SQLite fake).
	Notice string

	fake *stripefake.Fake
}

// Close stops the in-process fake Stripe of a stripe-fake selection.
func (s *Selection) Close() {
	if s != nil && s.fake != nil {
		s.fake.Close()
	}
}

// Select builds the backend named name ("" means sandbox):
//
//   - "sandbox": the SQLite fake;
//   - "stripe": Stripe test mode with STRIPE_TEST_SECRET_KEY (sk_test_
//     only, checked before any call), at STRIPE_API_BASE when set;
//   - "stripe-fake": an in-process fake Stripe started here, no key needed.
//
// It reads the environment through getenv, so the key stays in the process
// that makes the calls (an activity's worker), never in a workflow input.
func Select(name string, getenv func(string) string, logger *slog.Logger) (*Selection, error) {
	switch name {
	case "", NameSandbox:
		return &Selection{Name: NameSandbox}, nil
	case NameStripe:
		cfg, err := ConfigFromEnv(getenv)
		if err != nil {
			return nil, fmt.Errorf("payments %s: %w", name, err)
		}
		cfg.Logger = logger
		c, err := New(cfg)
		if err != nil {
			return nil, fmt.Errorf("payments %s: %w", name, err)
		}
		return &Selection{Name: NameStripe, Payments: c.Backend, Notice: Notice}, nil
	case NameStripeFake:
		f := stripefake.Start(stripefake.Options{Keys: []string{stripefake.TestKey}})
		c, err := New(Config{Key: stripefake.TestKey, BaseURL: f.URL(), Logger: logger})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("payments %s: %w", name, err)
		}
		return &Selection{Name: NameStripeFake, Payments: c.Backend, fake: f,
			Notice: Notice + " (here an in-process fake Stripe, sandbox/stripefake)"}, nil
	}
	return nil, fmt.Errorf("payments %q: must be one of sandbox, stripe, stripe-fake", name)
}
