// Package dbid names the database a migration ran on, so that a record of its success is bound to that
// database and not only to a hash of values: a database replaced or reset under a release is another database,
// and a record made on the old one proves nothing about it.
//
// A database is named by what the gate can learn without credentials:
//
//   - the Kubernetes object that holds its data (the embedded PostgreSQL's PersistentVolumeClaim, or its pod when
//     the data is in an emptyDir): its kind, name and UID, and its creation time. A pod or claim deleted and
//     made again under the same name has a new UID: the data it holds is new;
//   - the database URL (an external database): a SHA-256 of its engine, hosts, ports and database name (Locate),
//     so a URL pointed at another server or database is another database, and a new password, user or option
//     is the same one. The URL itself is never logged nor stored.
//
// Neither sees a database restored from a dump, or made again empty, under the same server and name: that
// needs a check that asks the database (docs/design.md, "What a record means").
package dbid

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Kinds of data-holding objects an ID can name.
const (
	KindPod                   = "pod"
	KindPersistentVolumeClaim = "persistentvolumeclaim"
)

// apiKinds are the kinds' names in the API (an owner reference's kind).
var apiKinds = map[string]string{KindPod: "Pod", KindPersistentVolumeClaim: "PersistentVolumeClaim"}

// ID is the database as the gate sees it now. The zero ID is unbound: records are not checked against it.
type ID struct {
	// Value is what a record stores: "pod/NAME@UID", "persistentvolumeclaim/NAME@UID", "db:HASH", or
	// several of them separated by a space.
	Value string
	// Legacy is the value a gate before the binding to the server and the name recorded for this database
	// ("url:HASH" of the whole URL in place of "db:HASH"); empty when it is Value. A record that names it is
	// about this database.
	Legacy string
	// Note says, when not empty, what the gate could not read of the database's URL and what follows from it.
	Note string
	// Since is when the object that holds the data was created (the API server's clock); zero when the ID
	// names no object. Evidence older than Since (a Job that completed before it) cannot be about this database.
	Since time.Time
	// Holder is the object that holds the data, when the ID names one: the records of this database are owned
	// by it, so they live exactly as long as the data they describe.
	Holder *Holder
}

// Holder is a data-holding object as an owner reference needs it.
type Holder struct {
	APIVersion, Kind, Name, UID string
}

// Bound reports whether the ID names a database.
func (id ID) Bound() bool { return id.Value != "" }

func (id ID) String() string {
	if !id.Bound() {
		return "(unbound)"
	}
	return id.Value
}

// Spec says how to name the database: both parts are optional.
type Spec struct {
	// Object is "pod/NAME" or "persistentvolumeclaim/NAME" (also "pvc/NAME"), in the gate's namespace.
	Object string
	// URL is the database URL; only a hash of its server and database name is kept.
	URL string
}

// Empty reports whether the spec names nothing (the records are then not bound).
func (s Spec) Empty() bool { return s.Object == "" && s.URL == "" }

// ParseObject splits "KIND/NAME" and checks the kind.
func ParseObject(s string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(s, "/")
	kind = strings.ToLower(kind)
	if kind == "pvc" {
		kind = KindPersistentVolumeClaim
	}
	switch {
	case !ok || name == "" || strings.Contains(name, "/"):
		return "", "", fmt.Errorf("database object %q: want KIND/NAME, KIND one of %s, %s", s, KindPod, KindPersistentVolumeClaim)
	case kind != KindPod && kind != KindPersistentVolumeClaim:
		return "", "", fmt.Errorf("database object %q: kind %q is not one of %s, %s", s, kind, KindPod, KindPersistentVolumeClaim)
	}
	return kind, name, nil
}

// Object is what Resolve needs to know of the data-holding object.
type Object struct {
	UID     string
	Created time.Time
}

// Getter reads an object of the namespace by kind and name.
type Getter func(ctx context.Context, kind, name string) (Object, error)

// Resolve names the database of spec, reading its object with get.
func Resolve(ctx context.Context, spec Spec, get Getter) (ID, error) {
	var parts, legacy []string
	var id ID
	if spec.Object != "" {
		kind, name, err := ParseObject(spec.Object)
		if err != nil {
			return ID{}, err
		}
		obj, err := get(ctx, kind, name)
		if err != nil {
			return ID{}, fmt.Errorf("reading the database's %s %s: %w", kind, name, err)
		}
		if obj.UID == "" {
			return ID{}, fmt.Errorf("the database's %s %s has no UID", kind, name)
		}
		parts = append(parts, fmt.Sprintf("%s/%s@%s", kind, name, obj.UID))
		legacy = append(legacy, parts[len(parts)-1])
		id.Since = obj.Created
		id.Holder = &Holder{APIVersion: "v1", Kind: apiKinds[kind], Name: name, UID: obj.UID}
	}
	if spec.URL != "" {
		part, old, note := urlPart(spec.URL)
		parts, legacy, id.Note = append(parts, part), append(legacy, old), note
	}
	id.Value = strings.Join(parts, " ")
	if l := strings.Join(legacy, " "); l != id.Value {
		id.Legacy = l
	}
	return id, nil
}

// HashURL is "url:" and 16 hex characters of the whole URL's SHA-256: the URL part of an ID before the
// binding named the server and the database only, and still when Locate cannot read the URL.
func HashURL(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "url:" + hex.EncodeToString(sum[:8])
}

// Describes reports whether evidence made on database recorded, at time at, is about the database now. A
// record that names a database must name this one. A record that names none (made before records were bound,
// or by a gate without a database) counts unless it is older than the object that holds the data now (at is
// then compared with the API server's Since: a cluster's clocks agree to well under the minutes that separate
// a database's creation from its first migration). An unbound now accepts everything. When the answer is no,
// why says so in words.
func (id ID) Describes(recorded string, at time.Time) (ok bool, why string) {
	switch {
	case !id.Bound():
		return true, ""
	case recorded != "" && recorded != id.Value && (id.Legacy == "" || recorded != id.Legacy):
		return false, fmt.Sprintf("it was recorded on database %s, and the database is now %s", recorded, id.Value)
	case recorded == "" && !id.Since.IsZero() && !at.IsZero() && at.Before(id.Since):
		return false, fmt.Sprintf("it was recorded at %s, before the database's %s was created at %s",
			at.UTC().Format(time.RFC3339), objectPart(id.Value), id.Since.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// objectPart is the object of an ID value without its UID, for messages.
func objectPart(value string) string {
	for _, p := range strings.Fields(value) {
		if obj, _, ok := strings.Cut(p, "@"); ok {
			return obj
		}
	}
	return value
}
