// Program otelcol is the minimal OpenTelemetry Collector the test suite starts: the OTLP receiver (gRPC and
// HTTP) and the contrib file exporter, which writes what it receives as OTLP JSON so a test can read it back.
// Written by hand in the shape of the OpenTelemetry Collector Builder's output, with nothing else compiled in.
// Its own telemetry is a zap logger on stderr and nothing more (see telemetryFactory).
package main

import (
	"context"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// telemetryConfig is what service.telemetry accepts: only logs.level (debug, info, warn, error; info when absent).
type telemetryConfig struct {
	Logs struct {
		Level string `mapstructure:"level"`
	} `mapstructure:"logs"`
}

// telemetryFactory replaces the builder's default, otelconftelemetry: that one serves the collector's own
// metrics on localhost:8888 unless told otherwise (two collectors in one test run would clash) and compiles
// in AWS, Azure and GCP resource detectors. Here: logs to stderr; meter and tracer are the package's no-ops.
func telemetryFactory() telemetry.Factory {
	return telemetry.NewFactory(
		func() component.Config { return &telemetryConfig{} },
		telemetry.WithCreateLogger(func(_ context.Context, set telemetry.LoggerSettings, cfg component.Config) (*zap.Logger, component.ShutdownFunc, error) {
			level := zapcore.InfoLevel
			if text := cfg.(*telemetryConfig).Logs.Level; text != "" {
				var err error
				if level, err = zapcore.ParseLevel(text); err != nil {
					return nil, nil, err
				}
			}
			zapConfig := zap.NewProductionConfig() // JSON lines on stderr
			zapConfig.Level = zap.NewAtomicLevelAt(level)
			zapConfig.Sampling = nil
			logger, err := set.BuildZapLogger(zapConfig)
			if err != nil {
				return nil, nil, err
			}
			return logger, func(context.Context) error { _ = logger.Sync(); return nil }, nil
		}))
}

func components() (otelcol.Factories, error) {
	factories := otelcol.Factories{Telemetry: telemetryFactory()}
	var err error
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	return factories, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "disagg-usage-extproc test collector: OTLP receiver, file exporter",
			Version:     "0.165.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// --config FILE (or file:FILE); ${env:NAME} inside it
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1) // cobra has printed the error
	}
}
