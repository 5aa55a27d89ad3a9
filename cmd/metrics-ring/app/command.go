package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"

	"github.com/metrics-ring/metrics-ring/pkg/version"
)

// NewCommand returns the metrics-ring command; it runs until ctx is done.
func NewCommand(ctx context.Context) *cobra.Command {
	return newCommand(NewOptions(), func(o *Options) error {
		// Process-wide settings, applied once, after validation.
		if err := logsapi.ValidateAndApply(o.Logging, nil); err != nil {
			return fmt.Errorf("applying logging flags: %w", err)
		}
		// Options.Apply would log an error for the unset label allow-list manifest on every start.
		if o.Metrics.AllowListMapping != nil || o.Metrics.AllowListMappingManifest != "" ||
			o.Metrics.ShowHiddenMetricsForVersion != "" || len(o.Metrics.DisabledMetrics) > 0 {
			o.Metrics.Apply()
		}
		return Run(ctx, o)
	})
}

// newCommand parses flags into o and calls run with the prepared options; tests pass their own run.
func newCommand(o *Options, run func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:          "metrics-ring",
		Short:        "Serve metrics.k8s.io from kubelets (a drop-in for metrics-server)",
		Long:         "metrics-ring serves the resource metrics API (metrics.k8s.io/v1 and v1beta1) as an aggregated API server.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.ShowVersion {
				fmt.Fprintln(c.OutOrStdout(), version.String())
				return nil
			}
			if err := o.Prepare(flagChanged(c.Flags())); err != nil {
				return err
			}
			return run(o)
		},
	}
	nfs := o.Flags()
	fs := cmd.Flags()
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	// metrics-server also adds klog's Go flags here; with component-base v0.36 they are only -v and -vmodule,
	// which the logging flag set above already has.

	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintf(c.OutOrStderr(), "Usage:\n  %s\n", c.UseLine())
		cliflag.PrintSections(c.OutOrStderr(), nfs, cols)
		return nil
	})
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(c.OutOrStdout(), "%s\n\nUsage:\n  %s\n", c.Long, c.UseLine())
		cliflag.PrintSections(c.OutOrStdout(), nfs, cols)
	})
	return cmd
}

// Prepare completes and validates the options; every invalid flag is reported.
func (o *Options) Prepare(changed func(string) bool) error {
	o.Complete(changed)
	if errs := o.Validate(); len(errs) > 0 {
		return fmt.Errorf("invalid flags: %w", errors.Join(utilerrors.Flatten(utilerrors.NewAggregate(errs)).Errors()...))
	}
	return nil
}
