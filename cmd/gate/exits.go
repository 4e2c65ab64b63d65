package main

import (
	"fmt"
	"strconv"
	"strings"
)

// exitCodes is a flag of exit codes, comma-separated (--fail-fast-exit-codes 3,7).
type exitCodes struct{ codes *[]int }

func (f exitCodes) String() string {
	if f.codes == nil {
		return ""
	}
	parts := make([]string, len(*f.codes))
	for i, c := range *f.codes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

func (f exitCodes) Set(s string) error {
	*f.codes = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		c, err := strconv.Atoi(p)
		if err != nil || c < 1 || c > 255 {
			return fmt.Errorf("%q is not an exit code (1 to 255)", p)
		}
		*f.codes = append(*f.codes, c)
	}
	return nil
}
