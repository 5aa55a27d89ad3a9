// Command etcd is etcd's own server main, built from the pinned go.etcd.io/etcd/server/v3 module so the
// end-to-end tests need no downloaded release binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
