package harness

// RequestHash is requestHash, for tests that write a step ahead by hand.
var RequestHash = requestHash

// AgentCalls counts the calls that went through a live scenario's agent
// transport (its chaos log lists every call).
func (h *Host) AgentCalls(tenantID string) int {
	h.mu.Lock()
	l, ok := h.live[tenantID]
	h.mu.Unlock()
	if !ok {
		return -1
	}
	return len(l.AgentChaos.Log())
}
