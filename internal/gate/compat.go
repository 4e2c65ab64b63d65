package gate

import (
	"fmt"
	"strings"
	"time"

	"github.com/premigrate/premigrate/internal/record"
)

// refusedAsContracted is the result of a pod refused because identities deployed after its own (later, sorted)
// contracted the schema: it names both identities and what to do.
func (v *view) refusedAsContracted(later []string) Result {
	by := later[len(later)-1]
	c, _ := record.ContractBegan(v.recs.Data[by])
	if !c.Done {
		return Result{Outcome: Failed, Reason: "SchemaContracted", Summary: fmt.Sprintf(
			"migration %s ran on this database, but identity %s, deployed after it, started contracting the schema (its contract step, "+
				"Job %s, at %s) and has not completed it: it runs, or it failed or was stopped halfway, so what the code of %s uses may be "+
				"gone; not starting the app\ndeploy %s or a later version (its contract runs again on that deploy); to start %s anyway, "+
				"knowing the schema was not changed, remove contractStartedAt from %s's record in ConfigMap %s/%s (contracting after %s: %s)",
			v.identity, by, c.Job, c.At.UTC().Format(time.RFC3339), v.identity, by, v.identity, by, v.namespace, v.recs.From,
			v.identity, strings.Join(later, ", "))}
	}
	return Result{Outcome: Failed, Reason: "SchemaContracted", Summary: fmt.Sprintf(
		"migration %s ran on this database, but identity %s, deployed after it, contracted the schema (its contract step, Job %s, "+
			"at %s): what the code of %s uses may be gone; not starting the app\ndeploy %s or a later version (helm upgrade, or "+
			"roll forward to its revision); the records are in ConfigMap %s/%s (contracted after %s: %s)",
		v.identity, by, c.Job, c.At.UTC().Format(time.RFC3339), v.identity, by, v.namespace, v.recs.From,
		v.identity, strings.Join(later, ", "))}
}
