package harness

import (
	"fmt"
	"strings"
	"sync"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/sandbox/agent"
)

// Models builds this process's model providers by name, once each: a real
// one with its key from this process's environment (llm.FromEnv), a fake
// one as an in-process fake server of that provider's wire, driven by the
// sandbox's plan policy (agent.ModelPolicy).
type Models struct {
	mu        sync.Mutex
	providers map[string]llm.Provider
	fakes     map[string]*fake.Server
}

// Provider returns the named provider asking for model.
func (m *Models) Provider(name, model string) (llm.Provider, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := name + "\n" + model
	if p, ok := m.providers[key]; ok {
		return p, nil
	}
	if m.providers == nil {
		m.providers = map[string]llm.Provider{}
		m.fakes = map[string]*fake.Server{}
	}
	var (
		p   llm.Provider
		err error
	)
	if wire, ok := strings.CutPrefix(name, agent.FakePrefix); ok {
		var s *fake.Server
		s, p, err = fake.New(wire, agent.ModelPolicy(), fake.Option{Model: model})
		if err == nil {
			m.fakes[key] = s
		}
	} else {
		p, err = llm.FromEnv(name, model)
	}
	if err != nil {
		return nil, err
	}
	m.providers[key] = p
	return p, nil
}

// Fake returns this process's fake server of the named fake provider for
// model, starting it if needed (tests inject faults into it).
func (m *Models) Fake(name, model string) (*fake.Server, error) {
	if !strings.HasPrefix(name, agent.FakePrefix) {
		return nil, fmt.Errorf("%q is not a fake provider", name)
	}
	if _, err := m.Provider(name, model); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fakes[name+"\n"+model], nil
}

// FakeRequests returns what this process's fake servers of the named fake
// provider have served (for tests: a turn billed twice would show twice).
func (m *Models) FakeRequests(name string) []fake.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fake.Request
	for key, s := range m.fakes {
		if strings.HasPrefix(key, name+"\n") {
			out = append(out, s.Requests()...)
		}
	}
	return out
}

// Close stops the fake servers.
func (m *Models) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.fakes {
		s.Close()
		delete(m.fakes, k)
		delete(m.providers, k)
	}
}
