package systems

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
)

const ticketsSchema = `
CREATE TABLE tickets (
	id TEXT PRIMARY KEY,
	customer_id TEXT NOT NULL,
	about TEXT NOT NULL,
	status TEXT NOT NULL,
	subject_line TEXT NOT NULL,
	body TEXT NOT NULL,
	resolution TEXT,
	created_at TEXT NOT NULL,
	closed_at TEXT
);
CREATE INDEX tickets_about ON tickets(about);
CREATE TABLE notes (
	id TEXT PRIMARY KEY,
	ticket_id TEXT NOT NULL,
	body TEXT NOT NULL,
	author TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX notes_ticket ON notes(ticket_id);
`

// CodeAlreadyClosed refuses closing a closed ticket.
const CodeAlreadyClosed = "already_closed"

// TicketStatuses are the statuses a ticket may have.
var TicketStatuses = []string{"open", "closed"}

// Ticket is a support case about an order or a subscription.
type Ticket struct {
	ID          string `json:"id"`
	CustomerID  string `json:"customer_id"`
	About       string `json:"about"`
	Status      string `json:"status"`
	SubjectLine string `json:"subject_line"`
	Body        string `json:"body"`
	Resolution  string `json:"resolution,omitempty"`
	Notes       []Note `json:"notes"`
}

// Note is a note on a ticket.
type Note struct {
	ID        string `json:"id"`
	TicketID  string `json:"ticket_id"`
	Body      string `json:"body"`
	Author    string `json:"author"`
	CreatedAt string `json:"created_at"`
}

// TicketsSystem is support cases and their notes.
type TicketsSystem struct{ sys *System }

// NewTickets serves the tickets system over sys.
func NewTickets(sys *System) *TicketsSystem { return &TicketsSystem{sys: sys} }

// System returns the underlying system.
func (t *TicketsSystem) System() *System { return t.sys }

const ticketCols = `id, customer_id, about, status, subject_line, body, COALESCE(resolution, '')`

func scanTicket(row interface{ Scan(...any) error }) (Ticket, error) {
	var t Ticket
	err := row.Scan(&t.ID, &t.CustomerID, &t.About, &t.Status, &t.SubjectLine, &t.Body, &t.Resolution)
	t.Notes = []Note{}
	return t, err
}

// ticketLinks are the subjects every event of a ticket links to.
func ticketLinks(t Ticket) []string { return []string{t.About, "customer:" + t.CustomerID} }

// NoteRequest is POST /tickets/tickets/{id}/notes.
type NoteRequest struct {
	Body   string `json:"body"`
	Author string `json:"author,omitempty"` // default "agent"
}

// Routes registers the tickets routes.
func (t *TicketsSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /tickets/tickets/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return t.Ticket(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("GET /tickets/tickets", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) {
			list, err := t.List(r.Context(), r.URL.Query().Get("about"))
			return map[string]any{"tickets": list}, err
		})
	})
	mux.HandleFunc("POST /tickets/tickets/{id}/notes", handleWrite(t.sys, func(tx *Tx, r *http.Request, req *NoteRequest) (any, error) {
		return t.addNote(tx, r.PathValue("id"), *req)
	}))
	type closeReq struct {
		Resolution string `json:"resolution"`
	}
	mux.HandleFunc("POST /tickets/tickets/{id}/close", handleWrite(t.sys, func(tx *Tx, r *http.Request, req *closeReq) (any, error) {
		return t.close(tx, r.PathValue("id"), req.Resolution)
	}))
}

// Ticket reads a ticket with its notes.
func (t *TicketsSystem) Ticket(ctx context.Context, id string) (Ticket, error) {
	tk, err := scanTicket(t.sys.db.QueryRowContext(ctx, `SELECT `+ticketCols+` FROM tickets WHERE id = ?`, id))
	if err != nil {
		return Ticket{}, missing(err, "ticket", id)
	}
	rows, err := t.sys.db.QueryContext(ctx, `SELECT id, ticket_id, body, author, created_at FROM notes WHERE ticket_id = ? ORDER BY rowid`, id)
	if err != nil {
		return Ticket{}, fmt.Errorf("read notes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n Note
		if err := rows.Scan(&n.ID, &n.TicketID, &n.Body, &n.Author, &n.CreatedAt); err != nil {
			return Ticket{}, fmt.Errorf("read notes: %w", err)
		}
		tk.Notes = append(tk.Notes, n)
	}
	if err := rows.Err(); err != nil {
		return Ticket{}, fmt.Errorf("read notes: %w", err)
	}
	return tk, nil
}

// List reads the tickets about a subject (all tickets when about is empty),
// by id, without their notes.
func (t *TicketsSystem) List(ctx context.Context, about string) ([]Ticket, error) {
	var rows *sql.Rows
	var err error
	if about == "" {
		rows, err = t.sys.db.QueryContext(ctx, `SELECT `+ticketCols+` FROM tickets ORDER BY id`)
	} else {
		rows, err = t.sys.db.QueryContext(ctx, `SELECT `+ticketCols+` FROM tickets WHERE about = ? ORDER BY id`, about)
	}
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	defer rows.Close()
	list := []Ticket{}
	for rows.Next() {
		tk, err := scanTicket(rows)
		if err != nil {
			return nil, fmt.Errorf("list tickets: %w", err)
		}
		list = append(list, tk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	return list, nil
}

// AddNote adds a note to a ticket; an empty author means "agent".
func (t *TicketsSystem) AddNote(ctx context.Context, id string, req NoteRequest) (Note, error) {
	return do(ctx, t.sys, func(tx *Tx) (Note, error) { return t.addNote(tx, id, req) })
}

// Close closes a ticket with a resolution.
func (t *TicketsSystem) Close(ctx context.Context, id, resolution string) (Ticket, error) {
	return do(ctx, t.sys, func(tx *Tx) (Ticket, error) { return t.close(tx, id, resolution) })
}

func (t *TicketsSystem) load(tx *Tx, id string) (Ticket, error) {
	tk, err := scanTicket(tx.QueryRow(`SELECT `+ticketCols+` FROM tickets WHERE id = ?`, id))
	if err != nil {
		return Ticket{}, missing(err, "ticket", id)
	}
	return tk, nil
}

func (t *TicketsSystem) addNote(tx *Tx, id string, req NoteRequest) (Note, error) {
	body := strings.TrimSpace(req.Body)
	author := req.Author
	if author == "" {
		author = "agent"
	}
	switch {
	case body == "":
		return Note{}, invalid("body is required")
	case len(body) > maxLongText:
		return Note{}, invalid("body is longer than %d bytes", maxLongText)
	case len(author) > maxName || !isIdent(author):
		return Note{}, invalid("author must be a short name of letters, digits, '_' or '-', got %q", author)
	}
	tk, err := t.load(tx, id)
	if err != nil {
		return Note{}, err
	}
	nid, err := tx.NextID("n_", "notes")
	if err != nil {
		return Note{}, err
	}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`INSERT INTO notes(id, ticket_id, body, author, created_at) VALUES (?, ?, ?, ?, ?)`, nid, id, body, author, now); err != nil {
		return Note{}, fmt.Errorf("add note: %w", err)
	}
	if err := tx.Emit("note_added", "ticket:"+id, map[string]any{"note_id": nid, "body": body, "author": author}, ticketLinks(tk)...); err != nil {
		return Note{}, err
	}
	return Note{ID: nid, TicketID: id, Body: body, Author: author, CreatedAt: now}, nil
}

func (t *TicketsSystem) close(tx *Tx, id, resolution string) (Ticket, error) {
	resolution = strings.TrimSpace(resolution)
	switch {
	case resolution == "":
		return Ticket{}, invalid("resolution is required")
	case len(resolution) > maxLongText:
		return Ticket{}, invalid("resolution is longer than %d bytes", maxLongText)
	}
	tk, err := t.load(tx, id)
	if err != nil {
		return Ticket{}, err
	}
	if tk.Status == "closed" {
		return Ticket{}, refuse(http.StatusConflict, CodeAlreadyClosed, "ticket %s is already closed", id)
	}
	if _, err := tx.Exec(`UPDATE tickets SET status = 'closed', resolution = ?, closed_at = ? WHERE id = ?`, resolution, fmtTime(tx.Now()), id); err != nil {
		return Ticket{}, fmt.Errorf("close ticket: %w", err)
	}
	if err := tx.Emit("ticket_status_changed", "ticket:"+id,
		map[string]any{"status": "closed", "previous": tk.Status, "resolution": resolution}, ticketLinks(tk)...); err != nil {
		return Ticket{}, err
	}
	tk.Status, tk.Resolution = "closed", resolution
	return tk, nil
}

// Seed inserts tickets, emitting ticket_opened (and, for a ticket seeded
// closed, ticket_status_changed), each linked to what the ticket is about
// and to its customer.
func (t *TicketsSystem) Seed(ctx context.Context, s *Seeder, tickets []Ticket) error {
	return t.sys.seed(ctx, func(tx *Tx) error {
		for _, tk := range tickets {
			at := s.Stamp()
			var closedAt, resolution any
			if tk.Status == "closed" {
				resolution = tk.Resolution
			}
			if _, err := tx.Exec(`INSERT INTO tickets(id, customer_id, about, status, subject_line, body, resolution, created_at)
				VALUES (?, ?, ?, 'open', ?, ?, ?, ?)`, tk.ID, tk.CustomerID, tk.About, tk.SubjectLine, tk.Body, resolution, fmtTime(at)); err != nil {
				return fmt.Errorf("ticket %s: %w", tk.ID, err)
			}
			if err := tx.emitAt(at, "ticket_opened", "ticket:"+tk.ID, map[string]any{
				"customer_id": tk.CustomerID, "about": tk.About, "status": "open", "subject_line": tk.SubjectLine, "body": tk.Body,
			}, ticketLinks(tk)); err != nil {
				return err
			}
			if tk.Status != "closed" {
				continue
			}
			at = s.Stamp()
			closedAt = fmtTime(at)
			if _, err := tx.Exec(`UPDATE tickets SET status = 'closed', closed_at = ? WHERE id = ?`, closedAt, tk.ID); err != nil {
				return fmt.Errorf("ticket %s: %w", tk.ID, err)
			}
			if err := tx.emitAt(at, "ticket_status_changed", "ticket:"+tk.ID,
				map[string]any{"status": "closed", "previous": "open", "resolution": tk.Resolution}, ticketLinks(tk)); err != nil {
				return err
			}
		}
		return nil
	})
}
