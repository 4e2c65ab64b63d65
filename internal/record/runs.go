package record

// Runs splits the run history (the value of HistoryKey) into its runs, oldest first, each as the text the
// history keeps: a header line (when it started, its identity, Job, pod, outcome and duration) and its last
// output lines, indented.
func Runs(history string) []string { return splitRuns(history) }
