// fmdetect prints "yes" when the tree rooted at its argument needs NVIDIA Fabric Manager,
// else "no": the rule of the DRA driver's pkg/fabricmanager (HasFabricManagerFabric in
// pkg/fabricmanager/fabric.go of the kubernetes-sigs/dra-driver-nvidia-gpu line), written
// again here with the standard library only. An NVSwitch entry under
// proc/driver/nvidia-nvswitch/devices, or "SW_MNG" in some
// sys/class/infiniband/*/device/vpd, means yes; a missing directory or file means no.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

func needed(root string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(root, "proc/driver/nvidia-nvswitch/devices"))
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	if len(entries) > 0 {
		return true, nil
	}
	files, err := filepath.Glob(filepath.Join(root, "sys/class/infiniband/*/device/vpd"))
	if err != nil {
		return false, err
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		if bytes.Contains(data, []byte("SW_MNG")) {
			return true, nil
		}
	}
	return false, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fmdetect ROOT")
		os.Exit(2)
	}
	yes, err := needed(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if yes {
		fmt.Println("yes")
	} else {
		fmt.Println("no")
	}
}
