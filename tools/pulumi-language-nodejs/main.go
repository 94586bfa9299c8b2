// Command pulumi-language-nodejs is a small Node.js language host for the Pulumi engine.
//
// Why it exists: the upstream host's module (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3)
// is not served by the Go module proxy this project builds from, and the Pulumi CLI cannot run a
// TypeScript/JavaScript program without one (docs/decisions/0001). This host implements the part of the
// LanguageRuntime protocol that `pulumi up | preview | refresh | destroy` use: it starts
// `node <…>/@pulumi/pulumi/cmd/run` with the engine's monitor address and the stack's configuration,
// exactly the arguments that script documents in its usage text. It does not install dependencies,
// generate SDKs or report plugin requirements (the project's plugins are installed by the bootstrap).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// version is stamped at build time (-ldflags "-X main.version=…").
var version = "0.0.0-dev"

// exitAfterUserMessage is the status the Node.js SDK uses when it has already printed an actionable
// error: the engine should stop without adding a message of its own.
const exitAfterUserMessage = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// Plugins are installed ahead of time by scripts/bootstrap.sh, so nothing is reported as required.
func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

// Dependencies are installed with `npm ci` by the bootstrap; the engine's request is a no-op here.
func (h *host) InstallDependencies(*pulumirpc.InstallDependenciesRequest,
	grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	return nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) About(context.Context, *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", node, err)
	}
	return &pulumirpc.AboutResponse{Executable: node, Version: strings.TrimSpace(string(out))}, nil
}

// runtimeOptions are the `runtime.options` of Pulumi.yaml that this host honours.
type runtimeOptions struct {
	typescript bool
	nodeargs   []string
	tsconfig   string
}

func parseOptions(s *structpb.Struct) runtimeOptions {
	// Upstream's default: TypeScript through ts-node. This project sets `typescript: false` and lets
	// Node 24 strip the types itself.
	opts := runtimeOptions{typescript: true}
	if s == nil {
		return opts
	}
	m := s.AsMap()
	if v, ok := m["typescript"].(bool); ok {
		opts.typescript = v
	}
	if v, ok := m["nodeargs"].(string); ok && v != "" {
		opts.nodeargs = strings.Fields(v)
	}
	if v, ok := m["tsconfig"].(string); ok {
		opts.tsconfig = v
	}
	return opts
}

// findUp returns the first dir/rel that exists walking up from each start directory.
func findUp(rel string, starts ...string) (string, error) {
	for _, start := range starts {
		if start == "" {
			continue
		}
		dir, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for {
			candidate := filepath.Join(dir, rel)
			if _, err := os.Stat(candidate); err == nil {
				return candidate, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("%s not found above %s: run `npm ci` in the repository first", rel, strings.Join(starts, ", "))
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	programDir := req.GetPwd()
	entry := req.GetProgram()
	rootDir := ""
	if info != nil {
		rootDir = info.GetRootDirectory()
		if info.GetProgramDirectory() != "" {
			programDir = info.GetProgramDirectory()
		}
		if info.GetEntryPoint() != "" {
			entry = info.GetEntryPoint()
		}
	}
	if entry == "" {
		entry = "."
	}
	opts := parseOptions(info.GetOptions())

	runScript, err := findUp(filepath.Join("node_modules", "@pulumi", "pulumi", "cmd", "run"), programDir, rootDir)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: "node is not on PATH (scripts/with-toolchain.sh puts Node 24 first)"}, nil
	}

	args := append([]string{}, opts.nodeargs...)
	args = append(args, runScript)
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	flag("monitor", req.GetMonitorAddress())
	flag("engine", h.engineAddress)
	flag("organization", req.GetOrganization())
	flag("project", req.GetProject())
	flag("root-directory", rootDir)
	flag("stack", req.GetStack())
	flag("pwd", programDir)
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	if req.GetParallel() > 0 {
		flag("parallel", strconv.Itoa(int(req.GetParallel())))
	}
	args = append(args, entry)
	args = append(args, req.GetArgs()...)

	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secrets, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = programDir
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secrets))
	if opts.typescript {
		cmd.Env = append(cmd.Env, "PULUMI_NODEJS_TYPESCRIPT=true")
	}
	if opts.tsconfig != "" {
		cmd.Env = append(cmd.Env, "PULUMI_NODEJS_TSCONFIG_PATH="+opts.tsconfig)
	}

	err = cmd.Run()
	// Node does not always flush process.stdout before exiting; make sure the engine sees it all.
	_ = os.Stdout.Sync()
	_ = os.Stderr.Sync()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", node, err)}, nil
	}
}

func main() {
	// The engine passes its own address last; it may put logging flags (-v=…, --logtostderr,
	// --tracing …) before it, which this host does not use.
	h := &host{}
	if n := len(os.Args); n > 1 && !strings.HasPrefix(os.Args[n-1], "-") {
		h.engineAddress = os.Args[n-1]
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: %v\n", err)
		os.Exit(1)
	}
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-nodejs: %v\n", err)
		os.Exit(1)
	}
}
