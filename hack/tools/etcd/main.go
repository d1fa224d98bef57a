// Command etcd is etcd's own server entrypoint, built at the version
// kube-apiserver v1.36 is released against.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
