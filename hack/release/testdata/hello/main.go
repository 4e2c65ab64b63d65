// Command hello is the small program the tests of hack/release cross-compile into their images.
package main

import "fmt"

var version = "dev"

func main() { fmt.Println("hello", version) }
