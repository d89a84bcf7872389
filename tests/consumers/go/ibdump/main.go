// ibdump prints what prometheus/procfs (the library node_exporter uses) parses from the
// InfiniBand class of a sysfs root, as JSON. Go reads files with raw syscalls, so no
// LD_PRELOAD shim can reach it: only a mount can.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/procfs/sysfs"
)

func main() {
	root := "/sys"
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	fs, err := sysfs.NewFS(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewFS:", err)
		os.Exit(1)
	}
	class, err := fs.InfiniBandClass()
	if err != nil {
		fmt.Fprintln(os.Stderr, "InfiniBandClass:", err)
		os.Exit(2)
	}
	out, err := json.Marshal(class)
	if err != nil {
		fmt.Fprintln(os.Stderr, "json:", err)
		os.Exit(3)
	}
	fmt.Println(string(out))
}
