// Command grpcecho is a proxyless gRPC example for meshnames' xDS control
// plane: a server that answers with its id, and a client that dials a
// service by name through grpc-go's own xDS resolver.
//
//	grpcecho serve --addr 127.0.0.1:9000 --id echo-1
//	GRPC_XDS_BOOTSTRAP=bootstrap.json grpcecho call [--count N] xds:///echo.svc.mesh.local:9000
//
// The bootstrap file names meshnames' ADS address and the node id
// <mesh>.<dataplane> (and, off loopback, the dataplane token as node
// metadata "token"). grpc-go reads it once, when the process starts.
//
// The service is grpc.testing.TestService (grpc-go's interop service), so
// the example needs no generated code of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	_ "google.golang.org/grpc/xds" // registers the xds:/// resolver and balancers
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "call":
		err = call(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcecho:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: grpcecho serve --addr HOST:PORT --id ID | grpcecho call [--count N] [--timeout D] TARGET")
	os.Exit(2)
}

type echo struct {
	testgrpc.UnimplementedTestServiceServer
	id string
}

func (e *echo) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: e.id}, nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "address to serve on")
	id := fs.String("id", "", "the id every answer carries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("serve: --id is required")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(g, &echo{id: *id})
	fmt.Printf("serving grpc.testing.TestService on %s as %s\n", ln.Addr(), *id)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); g.GracefulStop() }()
	return g.Serve(ln)
}

// call makes count calls to target and prints the id that answered each,
// or the call's error (and then exits 1). With --count 0 it calls until
// interrupted, every interval, and prints errors as lines of their own.
func call(args []string) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	count := fs.Int("count", 1, "how many calls to make; 0 calls until interrupted")
	interval := fs.Duration("interval", 0, "how long to wait between calls")
	timeout := fs.Duration("timeout", 10*time.Second, "how long each call may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("call: give one target, such as xds:///echo.svc.mesh.local:9000")
	}
	cc, err := grpc.NewClient(fs.Arg(0), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	c := testgrpc.NewTestServiceClient(cc)
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for i := 0; *count == 0 || i < *count; i++ {
		if i > 0 && *interval > 0 {
			select {
			case <-sig.Done():
				return nil
			case <-time.After(*interval):
			}
		}
		ctx, cancel := context.WithTimeout(sig, *timeout)
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		switch {
		case sig.Err() != nil:
			return nil
		case err != nil && *count == 0:
			fmt.Println("error:", err)
		case err != nil:
			return err
		default:
			fmt.Println(r.GetServerId())
		}
	}
	return nil
}
