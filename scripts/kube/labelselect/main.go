// Command labelselect says which label sets a Kubernetes label selector selects, with Kubernetes' own
// selector code (k8s.io/apimachinery): the deploy tests check that a NetworkPolicy or a Service reaches
// the pods it is meant to through it, not through a model of the semantics written for the tests.
//
// Standard input: {"selector": <a LabelSelector: matchLabels, matchExpressions>, "labels": [{...}, ...]}.
// Standard output: a JSON list, true for each label set the selector selects. Exit 2 on bad input.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type query struct {
	Selector metav1.LabelSelector `json:"selector"`
	Labels   []map[string]string  `json:"labels"`
}

func main() {
	var q query
	if err := json.NewDecoder(os.Stdin).Decode(&q); err != nil {
		fmt.Fprintln(os.Stderr, "labelselect: cannot read the query:", err)
		os.Exit(2)
	}
	selector, err := metav1.LabelSelectorAsSelector(&q.Selector)
	if err != nil {
		fmt.Fprintln(os.Stderr, "labelselect: invalid selector:", err)
		os.Exit(2)
	}
	answers := make([]bool, len(q.Labels))
	for i, set := range q.Labels {
		answers[i] = selector.Matches(labels.Set(set))
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		fmt.Fprintln(os.Stderr, "labelselect:", err)
		os.Exit(2)
	}
}
