package dbsecret_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/dbsecret"
)

const url = "postgres://app:" + dbsecret.Placeholder + "@db:5432/app?sslmode=disable"

func config() dbsecret.Config {
	return dbsecret.Config{Name: "db", PasswordKey: "password", URLKey: "url", URL: url, Length: 24}
}

func secret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"}, Data: data}
}

func TestAnEmptySecretGetsAPasswordAndTheURLMadeFromIt(t *testing.T) {
	cs := fake.NewClientset(secret(nil))
	out, err := dbsecret.Fill(context.Background(), cs.CoreV1().Secrets("shop"), config())
	require.NoError(t, err)
	assert.Equal(t, dbsecret.Filled, out)
	s, err := cs.CoreV1().Secrets("shop").Get(context.Background(), "db", metav1.GetOptions{})
	require.NoError(t, err)
	password := string(s.Data["password"])
	assert.Len(t, password, 24)
	assert.Regexp(t, `^[a-zA-Z0-9]+$`, password, "letters and digits: nothing to escape in a URL")
	assert.Equal(t, "postgres://app:"+password+"@db:5432/app?sslmode=disable", string(s.Data["url"]))
}

func TestAPasswordIsNeverReplaced(t *testing.T) {
	for name, s := range map[string]*corev1.Secret{
		"one filled before": secret(map[string][]byte{"password": []byte("first"), "url": []byte("postgres://app:first@db/app")}),
		"a password alone":  secret(map[string][]byte{"password": []byte("mine")}),
	} {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(s)
			out, err := dbsecret.Fill(context.Background(), cs.CoreV1().Secrets("shop"), config())
			require.NoError(t, err)
			assert.Equal(t, dbsecret.Kept, out)
			got, err := cs.CoreV1().Secrets("shop").Get(context.Background(), "db", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, s.Data, got.Data, "the Secret is unchanged")
			for _, a := range cs.Actions() {
				assert.NotEqual(t, "update", a.GetVerb(), "nothing is written")
			}
		})
	}
}

func TestTwoPasswordsAreNeverTheSame(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		cs := fake.NewClientset(secret(nil))
		_, err := dbsecret.Fill(context.Background(), cs.CoreV1().Secrets("shop"), config())
		require.NoError(t, err)
		s, _ := cs.CoreV1().Secrets("shop").Get(context.Background(), "db", metav1.GetOptions{})
		assert.False(t, seen[string(s.Data["password"])], "a password drawn twice")
		seen[string(s.Data["password"])] = true
	}
}

func TestAnUpdateThatLostARaceKeepsThePasswordTheOtherRunWrote(t *testing.T) {
	cs := fake.NewClientset(secret(nil))
	raced := false
	cs.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// another run filled it between this run's read and its update
		other := secret(map[string][]byte{"password": []byte("other"), "url": []byte("postgres://app:other@db/app")})
		if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), other, "shop"); err != nil {
			return true, nil, err
		}
		return true, nil, conflict()
	})
	out, err := dbsecret.Fill(context.Background(), cs.CoreV1().Secrets("shop"), config())
	require.NoError(t, err)
	assert.Equal(t, dbsecret.Kept, out)
	s, _ := cs.CoreV1().Secrets("shop").Get(context.Background(), "db", metav1.GetOptions{})
	assert.Equal(t, "other", string(s.Data["password"]))
}

func TestAMissingSecretOrABadConfigurationIsAnErrorThatSaysWhat(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(*dbsecret.Config)
		want string
	}{
		{"no Secret", func(c *dbsecret.Config) { c.Name = "other" }, "secret other does not exist"},
		{"no placeholder", func(c *dbsecret.Config) { c.URL = "postgres://app@db/app" }, "must hold {password} once"},
		{"one key for both", func(c *dbsecret.Config) { c.URLKey = "password" }, "must be two keys"},
		{"a short password", func(c *dbsecret.Config) { c.Length = 8 }, "length 8 is not between 16 and 128"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config()
			c.cfg(&cfg)
			_, err := dbsecret.Fill(context.Background(), fake.NewClientset(secret(nil)).CoreV1().Secrets("shop"), cfg)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), c.want), "error %q lacks %q", err, c.want)
		})
	}
}

func conflict() error {
	return apierrors.NewConflict(corev1.Resource("secrets"), "db", errors.New("the object has been modified"))
}
