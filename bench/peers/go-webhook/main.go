// go-webhook: the benchmark peer for trainenv (bench/e2e.sh). It is the webhook a team would
// write in Go with nothing but the standard library: net/http + crypto/tls (ListenAndServeTLS,
// TLS 1.2 minimum), encoding/json, one handler on POST /mutate.
//
// It does what trainenv's shipped torch policy does (docs/contract.md §2, §3, §4) for the pods the benchmark
// sends, and nothing more: no other policies, no torchtune, no /preview, no metrics, no reload.
//
// Decoding: like controller-runtime's admission.Decoder, the envelope is a typed AdmissionReview
// whose request.object stays raw (runtime.RawExtension there, json.RawMessage here) and is then
// decoded into a typed Pod. The Pod struct declares only the fields the injection reads, so
// encoding/json still scans (and validates) every byte of the body but allocates nothing for
// the rest; decoding into the full corev1.Pod, as a controller-runtime webhook does, would only
// be slower. The response is a typed AdmissionReview v1 whose patch is []byte, which
// encoding/json writes as base64 — exactly how k8s.io/api/admission/v1 does it.
//
//	go build -o go-webhook . && ./go-webhook -addr 127.0.0.1:8444 -cert tls.crt -key tls.key
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ---- wire types: the parts of admission.k8s.io/v1 and core/v1 this webhook reads ----

type AdmissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *AdmissionRequest  `json:"request,omitempty"`
	Response   *AdmissionResponse `json:"response,omitempty"`
}

type GroupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type AdmissionRequest struct {
	UID       string               `json:"uid"`
	Resource  GroupVersionResource `json:"resource"`
	Operation string               `json:"operation"`
	Object    json.RawMessage      `json:"object"`
}

type Status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type AdmissionResponse struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	Result    *Status `json:"status,omitempty"`
	Patch     []byte  `json:"patch,omitempty"`
	PatchType *string `json:"patchType,omitempty"`
}

type Pod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Subdomain  string      `json:"subdomain"`
		Containers []Container `json:"containers"`
	} `json:"spec"`
}

type Container struct {
	Name string `json:"name"`
	Env  []struct {
		Name string `json:"name"`
	} `json:"env"`
	Ports []struct {
		ContainerPort int `json:"containerPort"`
	} `json:"ports"`
	Resources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
}

// Output: env vars and ports as the Kubernetes API spells them.
type FieldRef struct {
	APIVersion string `json:"apiVersion"`
	FieldPath  string `json:"fieldPath"`
}
type EnvVar struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	ValueFrom *struct {
		FieldRef FieldRef `json:"fieldRef"`
	} `json:"valueFrom,omitempty"`
}
type ContainerPort struct {
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
}
type PatchOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	Value interface{} `json:"value"`
}

// ---- the torch injection (docs/contract.md §2 sources, §3 torch row, §4 patch rules) ----

const (
	indexKey    = "batch.kubernetes.io/job-completion-index"
	defaultPort = 29500
)

var trainingRoles = []string{"master", "worker", "node"}
var numericSuffix = regexp.MustCompile(`(\d+)$`)

type denial struct{ msg string }

func (d denial) Error() string { return d.msg }

func deny(format string, a ...interface{}) error {
	return denial{"trainenv: " + fmt.Sprintf(format, a...)}
}

func first(pod *Pod, sources ...func(*Pod) string) string {
	for _, s := range sources {
		if v := s(pod); v != "" {
			return v
		}
	}
	return ""
}
func label(k string) func(*Pod) string { return func(p *Pod) string { return p.Metadata.Labels[k] } }
func annotation(k string) func(*Pod) string {
	return func(p *Pod) string { return p.Metadata.Annotations[k] }
}

func positiveInt(pod *Pod, key string, def, max int) (int, error) {
	v, ok := pod.Metadata.Annotations[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, deny("annotation %s=%q: expected an integer from 1 to %d", key, v, max)
	}
	return n, nil
}

// cpuCores reads a Kubernetes CPU quantity ("4", "2.5", "2500m") rounded up; 1 if absent.
func cpuCores(q string) (int, error) {
	if q == "" {
		return 1, nil
	}
	scale := 1.0
	if strings.HasSuffix(q, "m") {
		q, scale = strings.TrimSuffix(q, "m"), 1000
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 0 {
		return 0, deny("cpu quantity %q: expected a Kubernetes quantity such as 4, 2.5 or 2500m", q)
	}
	n := int(math.Ceil(f/scale - 1e-9))
	if n < 1 {
		n = 1
	}
	return n, nil
}

func nprocPerNode(pod *Pod, c *Container) (string, error) {
	v := pod.Metadata.Annotations["trainenv.io/nproc-per-node"]
	if v == "" {
		v = "auto"
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 1 {
		return v, nil
	}
	hasGPU := false
	for _, m := range []map[string]string{c.Resources.Requests, c.Resources.Limits} {
		for name := range m {
			if strings.Contains(strings.ToLower(name), "gpu") {
				hasGPU = true
			}
		}
	}
	cpu := c.Resources.Requests["cpu"]
	if cpu == "" {
		cpu = c.Resources.Limits["cpu"]
	}
	switch v {
	case "gpu":
		return v, nil
	case "auto", "cpu":
		if v == "auto" && hasGPU {
			return v, nil
		}
		n, err := cpuCores(cpu)
		return strconv.Itoa(n), err
	}
	return "", deny("annotation trainenv.io/nproc-per-node=%q: expected an integer >= 1, auto, cpu or gpu", v)
}

// mutate returns the JSON Patch for a pod, nil when it needs none.
func mutate(pod *Pod) ([]PatchOp, error) {
	job := first(pod, label("jobset.sigs.k8s.io/jobset-name"), label("trainer.kubeflow.org/trainjob-name"),
		label("volcano.sh/job-name"), annotation("volcano.sh/job-name"), func(p *Pod) string { return p.Spec.Subdomain })
	if job == "" {
		return nil, deny("no job name: set label jobset.sigs.k8s.io/jobset-name")
	}
	role := first(pod, label("trainenv.io/role"), annotation("trainenv.io/role"), label("jobset.sigs.k8s.io/replicatedjob-name"),
		label("volcano.sh/task-spec"), annotation("volcano.sh/task-spec"))
	if role == "" {
		role = "node"
	}
	nodes, err := positiveInt(pod, "trainenv.io/num-nodes", 1, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	port, err := positiveInt(pod, "trainenv.io/master-port", defaultPort, 65535)
	if err != nil {
		return nil, err
	}
	replicas := map[string]int{role: nodes}
	if spec, ok := pod.Metadata.Annotations["trainenv.io/replicas"]; ok {
		replicas = map[string]int{}
		for _, kv := range strings.Split(spec, ",") {
			k, v, found := strings.Cut(strings.TrimSpace(kv), "=")
			n, err := strconv.Atoi(v)
			if !found || k == "" || err != nil || n < 0 {
				return nil, deny("annotation trainenv.io/replicas=%q: expected role=count,... such as master=1,worker=3", spec)
			}
			replicas[k] = n
		}
	}
	indexText := first(pod, annotation(indexKey), label(indexKey), label("volcano.sh/task-index"),
		func(p *Pod) string { return numericSuffix.FindString(p.Metadata.Name) })
	index := 0
	if indexText != "" {
		if index, err = strconv.Atoi(indexText); err != nil || index < 0 {
			return nil, deny("index %q: expected a non-negative integer", indexText)
		}
	}

	if len(pod.Spec.Containers) == 0 {
		return nil, deny("pod has no containers")
	}
	target := 0
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "node" {
			target = i
			break
		}
	}
	c := &pod.Spec.Containers[target]
	nproc, err := nprocPerNode(pod, c)
	if err != nil {
		return nil, err
	}

	addr, portText := fmt.Sprintf("%s-node-0-0.%s", job, job), strconv.Itoa(port)
	// The node rank as a literal, as trainenv writes it since its layout work (SPEC §2.2): for a
	// one-Job replicated job, the pod's completion index.
	nodeRank := EnvVar{Name: "PET_NODE_RANK", Value: strconv.Itoa(index)}
	want := []EnvVar{{Name: "PET_NNODES", Value: strconv.Itoa(nodes)}, {Name: "PET_NPROC_PER_NODE", Value: nproc}, nodeRank,
		{Name: "PET_MASTER_ADDR", Value: addr}, {Name: "PET_MASTER_PORT", Value: portText},
		{Name: "MASTER_ADDR", Value: addr}, {Name: "MASTER_PORT", Value: portText}}
	rank, world, training := 0, 0, false
	for _, r := range trainingRoles {
		if r == role {
			training, rank = true, world+index
		}
		world += replicas[r]
	}
	// Only RANK needs the index, so only training roles need one.
	if training && indexText == "" && replicas[role] > 1 {
		return nil, deny("no index for role %q with %d replicas: set annotation %s", role, replicas[role], indexKey)
	}
	if training && index >= replicas[role] {
		return nil, deny("index %d of role %q is out of range: it has %d replica(s)", index, role, replicas[role])
	}
	if training {
		want = append(want, EnvVar{Name: "WORLD_SIZE", Value: strconv.Itoa(world)}, EnvVar{Name: "RANK", Value: strconv.Itoa(rank)})
	}

	// Never overwrite: skip what the container already has; create missing arrays whole.
	var ops []PatchOp
	base := fmt.Sprintf("/spec/containers/%d", target)
	have := map[string]bool{}
	for _, e := range c.Env {
		have[e.Name] = true
	}
	var add []EnvVar
	for _, e := range want {
		if !have[e.Name] {
			add = append(add, e)
		}
	}
	if c.Env == nil && len(add) > 0 {
		ops = append(ops, PatchOp{"add", base + "/env", add})
	} else {
		for _, e := range add {
			ops = append(ops, PatchOp{"add", base + "/env/-", e})
		}
	}
	hasPort := false
	for _, p := range c.Ports {
		hasPort = hasPort || p.ContainerPort == port
	}
	if !hasPort {
		p := ContainerPort{port, "TCP"}
		if c.Ports == nil {
			ops = append(ops, PatchOp{"add", base + "/ports", []ContainerPort{p}})
		} else {
			ops = append(ops, PatchOp{"add", base + "/ports/-", p})
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	// Record what was done, as trainenv does ("add" on an existing member replaces it).
	if pod.Metadata.Annotations == nil {
		ops = append(ops, PatchOp{"add", "/metadata/annotations", map[string]string{"trainenv.io/injected": "torch"}})
	} else if pod.Metadata.Annotations["trainenv.io/injected"] != "torch" {
		ops = append(ops, PatchOp{"add", "/metadata/annotations/trainenv.io~1injected", "torch"})
	}
	return ops, nil
}

// ---- HTTP ----

func review(req *AdmissionRequest) *AdmissionResponse {
	resp := &AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != "CREATE" || req.Resource.Group != "" || req.Resource.Resource != "pods" {
		return resp
	}
	var pod Pod
	if err := json.Unmarshal(req.Object, &pod); err != nil {
		resp.Allowed, resp.Result = false, &Status{400, "trainenv: cannot decode the pod: " + err.Error()}
		return resp
	}
	labels, ann := pod.Metadata.Labels, pod.Metadata.Annotations
	if labels["trainer.kubeflow.org/trainjob-ancestor-step"] != "trainer" || ann["trainenv.io/inject"] == "false" {
		return resp
	}
	if fw, ok := labels["trainer.kubeflow.org/framework"]; ok && fw != "torch" && fw != "pytorch" {
		return resp // this peer implements the torch policy only
	}
	ops, err := mutate(&pod)
	if err != nil {
		resp.Allowed, resp.Result = false, &Status{400, err.Error()}
		return resp
	}
	if ops != nil {
		patch, err := json.Marshal(ops)
		if err != nil {
			panic(err) // our own types always marshal
		}
		pt := "JSONPatch"
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func handleMutate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 7<<20))
	if err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	var in AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil || in.Request.UID == "" {
		httpError(w, http.StatusBadRequest, "expected an AdmissionReview with request.uid")
		return
	}
	out := AdmissionReview{APIVersion: in.APIVersion, Kind: "AdmissionReview", Response: review(in.Request)}
	res, err := json.Marshal(out)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(res)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8444", "HTTPS listen address")
	cert := flag.String("cert", "tls.crt", "serving certificate, PEM")
	key := flag.String("key", "tls.key", "its private key, PEM")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", handleMutate)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{
		Addr:              *addr,
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // handshake noise off, as trainenv's warn level
	}
	log.Printf("go-webhook: serving https://%s/mutate", *addr)
	log.Fatal(srv.ListenAndServeTLS(*cert, *key))
}
