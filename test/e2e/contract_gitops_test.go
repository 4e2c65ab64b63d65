//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

var (
	contractArgoScenario = scenarios.Declare(framework.Contract, framework.Matrix, "contract-argocd")
	contractFluxScenario = scenarios.Declare(framework.Contract, framework.Matrix, "contract-flux")
)

// TestTheContractStepWaitsForTheOldPodsUnderArgoCDAndFlux runs upgradeWithContract through the two GitOps
// controllers: an Argo CD Application (argocd mode: the contract is a PostSync hook, which Argo CD starts once
// the Deployment is Healthy, while the old pods still terminate) and a Flux HelmRelease (hook mode: a
// post-upgrade hook after helm-controller's wait). Each deploy ends when the controller reports its sync or
// reconcile done; the contract must have started after every old pod's app exited, once, and be recorded.
func TestTheContractStepWaitsForTheOldPodsUnderArgoCDAndFlux(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	t.Run("argocd", sharing(weightOne, 120*time.Second, func(t *testing.T) {
		res := scenario(t, contractArgoScenario, "argocd")
		gitopsUp(t, contractArgoScenario, "argocd")
		a := newArgoApp(t, "contract-argo")
		_, id, _ := upgradeWithContract(t, res, a.Release, func(v map[string]any) time.Duration {
			at := a.apply(argoValues(v), true)
			// the sync of these values: one that started after the apply (Argo CD's clock, to the second), ended
			// with its PostSync hook
			var app application
			framework.WaitUntil(t, "Argo CD to sync "+a.Namespace+" after the apply", 6*time.Minute, func(context.Context) (bool, error) {
				app = a.get()
				op := app.Status.OperationState
				return !op.StartedAt.Before(at.Truncate(time.Second)) && op.Phase != "" && op.Phase != "Running", nil
			})
			if op := app.Status.OperationState; op.Phase != "Succeeded" {
				t.Fatalf("sync %s: %s", op.Phase, op.Message)
			}
			d := time.Since(at)
			a.healthy(2 * time.Minute)
			return d
		})
		res.Upgrades = 1
		a.AssertWitness(context.Background(), id)
	}))
	t.Run("flux", sharing(weightOne, 120*time.Second, func(t *testing.T) {
		res := scenario(t, contractFluxScenario, "flux")
		gitopsUp(t, contractFluxScenario, "flux")
		ns := env.NewNamespace(t, "contract-flux", restricted)
		f := fluxRelease{Release: env.NewRelease(t, ns, "shop", "")}
		_, id, _ := upgradeWithContract(t, res, f.Release, func(v map[string]any) time.Duration {
			start := time.Now()
			f.apply(fluxValues(v))
			if ready := f.settle(6 * time.Minute); ready.Status != "True" {
				t.Fatalf("the HelmRelease did not reconcile: %s: %s", ready.Reason, ready.Message)
			}
			return time.Since(start)
		})
		res.Upgrades = 1
		f.AssertWitness(context.Background(), id)
	}))
}
