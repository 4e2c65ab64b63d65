package render

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// buildUmbrella writes the chart of docs/workloads.md from its blocks, as written, into a temporary folder,
// with the library where `helm dependency build` puts it (in the umbrella and in its subchart).
func buildUmbrella(t *testing.T) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "shop")
	framework.BuildFromDocs(t, &framework.Runner{}, filepath.Join("..", "..", "docs", "workloads.md"), chart, libDir, ".", "charts/worker")
	return chart
}

// gatedPod is one workload's pod template with the name of the workload that owns it.
type gatedPod struct {
	workload string
	template corev1.PodTemplateSpec
}

// docs/workloads.md's umbrella chart renders, with Helm 3 and Helm 4, one migration that gates every workload
// of the release: the web Deployment and the report CronJob of the umbrella and the worker Deployment of its
// subchart carry the migration Job's identity and wait for that Job, and the gate's RoleBinding takes in
// each workload's ServiceAccount. Without `shared` the subchart's pods would wait for another Job (its names
// and its identity are its own chart's), and a ServiceAccount left out of the binding would never start.
func TestEveryWorkloadOfTheUmbrellaChartWaitsForItsOneMigration(t *testing.T) {
	for _, cliName := range []string{"helm", "helm4"} {
		t.Run(cliName, func(t *testing.T) {
			cli := helmCLI(t, cliName)
			chart := buildUmbrella(t)
			r, err := decode(map[string]string{"out": runIn(t, "", cli, "", "template", "shop", chart, "--namespace", namespace)})
			require.NoError(t, err, "the umbrella's render does not decode")
			job := r.job(t)
			id := job.Labels["premigrate.io/identity"]
			require.Len(t, id, 10)
			assert.True(t, isPlainJobName("shop", job.Name), "a plain Job named by its spec: %s", job.Name)
			pods := []gatedPod{
				{"web", mustFind[*appsv1.Deployment](t, r, "Deployment", "shop-web").Spec.Template},
				{"worker", mustFind[*appsv1.Deployment](t, r, "Deployment", "shop-worker").Spec.Template},
				{"report", mustFind[*batchv1.CronJob](t, r, "CronJob", "shop-report").Spec.JobTemplate.Spec.Template},
			}
			binding := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", "shop-gate")
			var bound []string
			for _, s := range binding.Subjects {
				bound = append(bound, s.Name)
			}
			for _, p := range pods {
				assert.Equal(t, id, p.template.Annotations["premigrate.io/identity"], "the %s pods' identity", p.workload)
				gate := strings.Join(container(t, p.template.Spec.InitContainers, "wait-for-migration").Args, " ")
				assert.Contains(t, gate, "--identity "+id+" ", "the %s pods' gate waits for the migration's identity", p.workload)
				assert.Contains(t, gate, "--job "+job.Name, "the %s pods' gate watches the migration Job", p.workload)
				assert.Contains(t, gate, "--store shop-migration-records", "the %s pods' gate reads the release's records", p.workload)
				assert.Equal(t, "shop-"+p.workload, p.template.Spec.ServiceAccountName)
				assert.Contains(t, bound, p.template.Spec.ServiceAccountName, "the gate's RoleBinding takes in the %s pods' ServiceAccount", p.workload)
			}
			assert.Len(t, bound, 3, "the gate's RoleBinding: the three workloads' ServiceAccounts, no other")
		})
	}
}
