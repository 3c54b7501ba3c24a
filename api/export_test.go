package api

// Routes lists the registered routes in registration order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// Pattern is the ServeMux pattern, "METHOD /path".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// OpenAPI returns the document the server serves at /openapi.json.
func (s *Server) OpenAPI() []byte { return s.openapi }
