package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/demo/schema"
)

// VersionHeader carries the app version (DEMO_VERSION) on every response of the server, errors
// included, so a client can tell which version answered.
const VersionHeader = "X-Demo-Version"

// Schema versions whose migrations the request path depends on.
const (
	versionAuthor     = 2 // added records.author
	versionTags       = 4 // created the tags table
	versionSource     = 5 // added records.source
	versionDropSource = 6 // dropped records.source
	versionNotes      = 7 // created the notes table
	versionContent    = 8 // added records.content, the new name of records.body (its contract drops body)
)

// shape is what the records API of an app version reads and writes beyond the columns of schema
// version 1: what each migration up to that version added, as far as that schema version still
// has it. Each of them makes a server fail on a schema older than its own, as an app would. The
// index of version 3 gives a request nothing to touch, and version 6 only removes something, so
// a server of version 3 or 6 still answers on the schema before its own. Version 8 renames body to
// content as an expand/contract pair: its migration adds content and keeps both in step, its
// contract (demo contract) drops body, after which a server of version 7 or older fails.
type shape struct {
	author bool // records.author (from version 2)
	tags   bool // one row in tags per record (from version 4)
	source bool // records.source (version 5 only: version 6 drops it)
	notes  bool // one row in notes per record (from version 7)
	// content: the record's text is records.content, not records.body (from version 8)
	content bool
}

// text is the column of the record's text in shape sh.
func (sh shape) text() string {
	if sh.content {
		return "content"
	}
	return "body"
}

func shapeOf(appVersion int) shape {
	return shape{
		author: appVersion >= versionAuthor,
		tags:   appVersion >= versionTags,
		source: appVersion == versionSource,
		notes:  appVersion >= versionNotes,

		content: appVersion >= versionContent,
	}
}

// requestShape is the shape of one request, inside its transaction tx. It is the app version's,
// except that a version-5 server leaves records.source alone on schema 6.
//
// Version 5 is the only one whose schema loses a column it uses while it is still ready (on schema
// 6: a rolling upgrade to 6, or a rollback from it), so only it checks, once per request, and
// the simplest correct check is the schema version read in the request's own transaction:
//   - It takes ACCESS SHARE on records first, which conflicts with the ACCESS EXCLUSIVE lock of
//     migration 6's ALTER TABLE: either the migration waits until this request commits, or the
//     request waits until the migration committed and then reads version 6 (READ COMMITTED: each
//     statement sees what committed before it began). Reading the version without the lock would
//     leave a window: read 5, block behind the migration's lock, run the INSERT after the drop,
//     and answer 500 during an upgrade that does everything right.
//   - It asks "was source dropped?" (version >= 6), not "does source exist?": on a schema older
//     than 5 the request still names the column and fails with 42703, as a version-5 app on an
//     unmigrated schema must. Catching 42703 for source would hide that case too.
func (s *Server) requestShape(ctx context.Context, tx pgx.Tx) (shape, error) {
	sh := shapeOf(s.cfg.AppVersion)
	if !sh.source {
		return sh, nil
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE records IN ACCESS SHARE MODE"); err != nil {
		return sh, fmt.Errorf("lock records before reading the schema version: %w", err)
	}
	v, err := schema.Version(ctx, tx)
	if err != nil {
		return sh, fmt.Errorf("check whether records.source was dropped: %w", err)
	}
	sh.source = v < versionDropSource
	return sh, nil
}

// newRecord is the body of POST /records.
type newRecord struct {
	Body *string `json:"body"`
	// Author is stored from version 2 on; it defaults to "demo-v<version>".
	Author *string `json:"author"`
}

// record is the answer of GET /records/{id}: the fields after CreatedAt are present when the app
// version reads them.
type record struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"createdAt"`
	Author    *string   `json:"author,omitzero"`    // "" when the record has none
	Source    *string   `json:"source,omitzero"`    // "" when the record has none
	Tags      []string  `json:"tags,omitzero"`      // by name, [] when the record has none
	NoteCount *int64    `json:"noteCount,omitzero"` // how many notes the record has
}

func (s *Server) createRecord(w http.ResponseWriter, r *http.Request) {
	var in newRecord
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("decode request: %v", err))
		return
	}
	if in.Body == nil {
		writeError(w, http.StatusBadRequest, `request needs a "body" field`)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	id, err := s.insertRecord(ctx, in)
	if err != nil {
		s.log.Printf("POST /records: %v", err)
		writeDatabaseError(w, "could not store the record", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]int64{"id": id})
}

// insertRecord stores a record with everything the app version writes, in one transaction.
func (s *Server) insertRecord(ctx context.Context, in newRecord) (int64, error) {
	author := fmt.Sprintf("demo-v%d", s.cfg.AppVersion)
	if in.Author != nil {
		author = *in.Author
	}
	var id int64
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		sh, err := s.requestShape(ctx, tx)
		if err != nil {
			return err
		}
		cols, args := []string{sh.text()}, []any{*in.Body}
		if sh.author {
			cols, args = append(cols, "author"), append(args, author)
		}
		if sh.source {
			cols, args = append(cols, "source"), append(args, "demo")
		}
		params := make([]string, len(cols))
		for i := range params {
			params[i] = "$" + strconv.Itoa(i+1)
		}
		columns := strings.Join(cols, ", ")
		insert := "INSERT INTO records (" + columns + ") VALUES (" + strings.Join(params, ", ") + ") RETURNING id"
		if err := tx.QueryRow(ctx, insert, args...).Scan(&id); err != nil {
			return fmt.Errorf("insert into records (%s): %w", columns, err)
		}
		if sh.tags {
			tag := fmt.Sprintf("v%d", s.cfg.AppVersion)
			if _, err := tx.Exec(ctx, "INSERT INTO tags (record_id, name) VALUES ($1, $2)", id, tag); err != nil {
				return fmt.Errorf("insert into tags: %w", err)
			}
		}
		if sh.notes {
			note := fmt.Sprintf("created by demo v%d", s.cfg.AppVersion)
			if _, err := tx.Exec(ctx, "INSERT INTO notes (record_id, body) VALUES ($1, $2)", id, note); err != nil {
				return fmt.Errorf("insert into notes: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store the record: %w", err)
	}
	return id, nil
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "record id must be an integer")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	rec, err := s.readRecord(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		writeError(w, http.StatusNotFound, fmt.Sprintf("record %d not found", id))
	case err != nil:
		s.log.Printf("GET /records/%d: %v", id, err)
		writeDatabaseError(w, "could not read the record", err)
	default:
		writeJSON(w, http.StatusOK, rec)
	}
}

// readRecord reads a record with everything the app version reads, in one statement; the error
// wraps pgx.ErrNoRows when there is no such record.
func (s *Server) readRecord(ctx context.Context, id int64) (record, error) {
	rec := record{ID: id}
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		sh, err := s.requestShape(ctx, tx)
		if err != nil {
			return err
		}
		cols, dest := []string{sh.text(), "created_at"}, []any{&rec.Body, &rec.CreatedAt}
		if sh.author {
			rec.Author = new(string)
			cols, dest = append(cols, "coalesce(author, '')"), append(dest, rec.Author)
		}
		if sh.source {
			rec.Source = new(string)
			cols, dest = append(cols, "coalesce(source, '')"), append(dest, rec.Source)
		}
		if sh.tags {
			cols = append(cols, "ARRAY(SELECT name FROM tags WHERE record_id = records.id ORDER BY name)")
			dest = append(dest, &rec.Tags)
		}
		if sh.notes {
			rec.NoteCount = new(int64)
			cols = append(cols, "(SELECT count(*) FROM notes WHERE record_id = records.id)")
			dest = append(dest, rec.NoteCount)
		}
		query := "SELECT " + strings.Join(cols, ", ") + " FROM records WHERE id = $1"
		if err := tx.QueryRow(ctx, query, id).Scan(dest...); err != nil {
			return fmt.Errorf("select from records: %w", err)
		}
		if sh.tags && rec.Tags == nil {
			rec.Tags = []string{} // present, and empty
		}
		return nil
	})
	if err != nil {
		return record{}, fmt.Errorf("read record %d: %w", id, err)
	}
	return rec, nil
}
