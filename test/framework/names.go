package framework

import "strings"

// Fullname is the premigrate chart's fullname of a release (charts/premigrate/templates/_helpers.tpl, without
// nameOverride or fullnameOverride): the release's name when it contains the chart's name, else
// "<release>-premigrate". The objects of a release are named after it.
func Fullname(release string) string {
	if strings.Contains(release, "premigrate") {
		return release
	}
	return release + "-premigrate"
}
