package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNotRecorded is WriteContracted's error when the identity has no record: its migration has not succeeded
// on this database, and a contract must never be recorded (or run) for it.
var ErrNotRecorded = errors.New("the identity is not recorded")

// ContractOptions says whose contract step to record where.
type ContractOptions struct {
	Namespace string // only for messages
	ConfigMap string
	Identity  string
	Job       string
	// Retry bounds the retries while the API server fails (a conflict is always retried); 0 tries once.
	Retry time.Duration
	Now   func() time.Time
	Log   *slog.Logger
}

// WriteContracted records in the identity's record that its contract step succeeded now, by o.Job: a
// read-modify-write of the ConfigMap with its resourceVersion, retried on conflict. The record must exist
// (ErrNotRecorded otherwise); everything else it holds stays.
func WriteContracted(ctx context.Context, client ConfigMapClient, o ContractOptions) error {
	return writeContract(ctx, client, o, "contractedAt", "contractJob", "recorded the contract step")
}

// WriteContractStarted records in the identity's record that its contract step starts now, by o.Job, before its
// command runs: from then on the schema may be contracted, halfway or whole, and the pods of identities deployed
// before it are refused (ContractBegan), whether the command then succeeds, fails or is stopped. Only a contract
// that succeeds (WriteContracted) is done. As WriteContracted, the record must exist.
func WriteContractStarted(ctx context.Context, client ConfigMapClient, o ContractOptions) error {
	return writeContract(ctx, client, o, "contractStartedAt", "contractStartJob", "recorded the start of the contract step")
}

func writeContract(ctx context.Context, client ConfigMapClient, o ContractOptions, atKey, jobKey, said string) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	where := fmt.Sprintf("ConfigMap %s/%s", o.Namespace, o.ConfigMap)
	deadline := time.Now().Add(o.Retry)
	delay := 500 * time.Millisecond
	for {
		err := contractOnce(ctx, client, o, atKey, jobKey)
		switch {
		case err == nil:
			o.Log.Info(fmt.Sprintf("%s of identity %s (job %s) in %s", said, o.Identity, o.Job, where))
			return nil
		case errors.Is(err, ErrNotRecorded) || ctx.Err() != nil:
			return fmt.Errorf("record the contract step of identity %s in %s: %w", o.Identity, where, err)
		}
		wait := delay
		if apierrors.IsConflict(err) {
			wait = time.Duration(rand.Int64N(int64(100 * time.Millisecond)))
		} else if time.Until(deadline) <= 0 {
			return fmt.Errorf("record the contract step of identity %s in %s: %w", o.Identity, where, err)
		} else {
			delay = min(2*delay, 5*time.Second)
			o.Log.Warn(fmt.Sprintf("updating %s failed, retrying in %s: %v", where, wait, err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("record the contract step of identity %s in %s: %w", o.Identity, where, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// Contract is the contract step recorded with an identity (its record's keys contractedAt and contractJob, beside
// those of Entry): when it succeeded and which Job ran it. Of a contract that started and has not succeeded
// (ContractBegan: contractStartedAt and contractStartJob), Done is false and At and Job are its start's.
type Contract struct {
	At   time.Time
	Job  string
	Done bool
}

type wireContract struct {
	ContractedAt      string `json:"contractedAt"`
	ContractJob       string `json:"contractJob"`
	ContractStartedAt string `json:"contractStartedAt"`
	ContractStartJob  string `json:"contractStartJob"`
}

// ContractBegan returns the contract step of an identity's record that succeeded (Done) or, failing that, one
// that started and has not succeeded: it runs, or it failed or was stopped halfway. Either may have changed the
// schema under the older identities' code. A record written anew holds neither.
func ContractBegan(value string) (Contract, bool) {
	if c, ok := ContractOf(value); ok {
		return c, true
	}
	var w wireContract
	if err := json.Unmarshal([]byte(value), &w); err != nil || w.ContractStartedAt == "" {
		return Contract{}, false
	}
	at, err := time.Parse(time.RFC3339, w.ContractStartedAt)
	if err != nil {
		return Contract{}, false
	}
	return Contract{At: at, Job: w.ContractStartJob}, true
}

// ContractOf returns the contract step recorded in an identity's record value, and whether one is. A record
// written anew (Write: the migration ran again, on a database that changed or lacked it) holds none: the
// contract did not run on that database either.
func ContractOf(value string) (Contract, bool) {
	var w wireContract
	if err := json.Unmarshal([]byte(value), &w); err != nil || w.ContractedAt == "" {
		return Contract{}, false
	}
	at, err := time.Parse(time.RFC3339, w.ContractedAt)
	if err != nil {
		return Contract{}, false
	}
	return Contract{At: at, Job: w.ContractJob, Done: true}, true
}

func contractOnce(ctx context.Context, client ConfigMapClient, o ContractOptions, atKey, jobKey string) error {
	cm, err := client.Get(ctx, o.ConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the ConfigMap does not exist", ErrNotRecorded)
	}
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	value, found := cm.Data[o.Identity]
	if !found {
		return ErrNotRecorded
	}
	// every key of the record stays as it is: the contract's two are set beside them
	var fields map[string]any
	if err := json.Unmarshal([]byte(value), &fields); err != nil {
		return fmt.Errorf("%w: its record does not decode: %w", ErrNotRecorded, err)
	}
	fields[atKey] = o.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
	fields[jobKey] = o.Job
	b, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("encode the record: %w", err)
	}
	updated := cm.DeepCopy()
	updated.Data[o.Identity] = string(b)
	if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return nil
}

// ContractedAfter returns the identities recorded in data whose contract step ran and whose migration was
// deployed after identity's (JobCreated): the schema no longer serves what identity needs. An identity without
// a JobCreated (records from before it was stored) is compared by its completion time.
func ContractedAfter(data map[string]string, identity string) []string {
	own, found, err := Lookup(data, identity)
	if !found || err != nil {
		return nil
	}
	var out []string
	for k, v := range data {
		if k == identity || k == PrunedKey {
			continue
		}
		if _, ok := ContractOf(v); !ok {
			continue
		}
		e, err := Decode(v)
		if err == nil && deployedAt(e).After(deployedAt(own)) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func deployedAt(e Entry) time.Time {
	if !e.JobCreated.IsZero() {
		return e.JobCreated
	}
	return e.CompletedAt
}
