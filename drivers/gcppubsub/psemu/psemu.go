// Package psemu serves Google's in-process Pub/Sub fake, pstest
// (cloud.google.com/go/pubsub/v2/pstest), for tests and local runs of
// programs that use package gcppubsub: Start serves it on a TCP address,
// NewClient returns a client of it, and a program started with
// PUBSUB_EMULATOR_HOST set to Addr reaches it as the SDK reaches any
// emulator. It is test support, with a small API.
//
// It adds one thing to pstest: a Pull's answer is copied, then ordered
// after the fake's lock, before it is sent. pstest sends the message
// objects it keeps (and later changes, when it delivers them again) and
// marshals them outside its lock, which the race detector reports as a
// data race in the fake under unary Pull, the gcppubsub driver's receive.
package psemu

import (
	"context"
	"fmt"
	"net"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// Server is a pstest fake served on a TCP address.
type Server struct {
	// Fake is the pstest server (its Addr is not the one to use).
	Fake *pstest.Server
	// Addr is host:port, for PUBSUB_EMULATOR_HOST.
	Addr string

	gs  *grpc.Server
	lis net.Listener
}

// Start serves a fresh pstest fake on addr ("127.0.0.1:0": a free port).
// opts are pstest's (error injection).
func Start(addr string, opts ...pstest.ServerReactorOption) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("psemu: %w", err)
	}
	fake := pstest.NewServer(opts...)
	s := &Server{Fake: fake, Addr: lis.Addr().String(), lis: lis}
	// Pub/Sub takes requests of 10 MB; gRPC's default is 4 MiB.
	s.gs = grpc.NewServer(grpc.UnaryInterceptor(s.intercept), grpc.MaxRecvMsgSize(maxRequest))
	pubsubpb.RegisterPublisherServer(s.gs, &fake.GServer)
	pubsubpb.RegisterSubscriberServer(s.gs, &fake.GServer)
	pubsubpb.RegisterSchemaServiceServer(s.gs, &fake.GServer)
	go func() { _ = s.gs.Serve(lis) }()
	return s, nil
}

// maxRequest is the largest request the server takes: a Publish of
// Pub/Sub's 10 MB, with room for gRPC's framing.
const maxRequest = 16 << 20

const pullMethod = "/google.pubsub.v1.Subscriber/Pull"

// intercept copies a Pull's answer, then takes and releases the fake's
// lock (through a GetTopic that finds nothing), so that the fake's later
// changes to the messages it keeps come after the copy was read.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil || info.FullMethod != pullMethod {
		return resp, err
	}
	cp := proto.Clone(resp.(proto.Message))
	_, _ = s.Fake.GServer.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/psemu/topics/-"})
	return cp, nil
}

// NewClient returns a client of the fake for project, on a connection of
// its own, which Close of the client closes.
func (s *Server) NewClient(ctx context.Context, project string) (*pubsub.Client, error) {
	return pubsub.NewClient(ctx, project, s.ClientOptions()...)
}

// ClientOptions are the options that make a client talk to the fake
// (what PUBSUB_EMULATOR_HOST=Addr does), on one connection (the SDK's
// default pool opens several, each on first use).
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr),
		option.WithGRPCConnectionPool(1),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Close stops serving and stops the fake.
func (s *Server) Close() error {
	s.gs.Stop()
	return s.Fake.Close()
}
