package io.disaggusage.extproc.stream;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.rewrite.ExchangeReport;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.UsageFigures;
import java.math.BigInteger;

/**
 * The dynamic metadata of behaviour.md §7, under the configured namespace. Envoy's Struct numbers are
 * doubles; token counts are far below 2^53 in practice, and access logs print them as integers.
 */
final class UsageMetadata {
  private UsageMetadata() {}

  /** Full metadata for a generation response whose body was read. */
  static Struct of(String namespace, ExchangeReport report, String fallbackModel, String refused) {
    Struct.Builder fields = Struct.newBuilder();
    UsageFigures f = report.figures();
    if (f != null) {
      put(fields, "prompt_tokens", f.prompt());
      put(fields, "cached_tokens", f.cached());
      put(fields, "completion_tokens", f.completion());
      put(fields, "total_tokens", f.total());
      put(fields, "reported_cached_tokens", f.reportedCached());
      // The names Envoy AI Gateway's llmRequestCosts examples use, for rate limits and access logs
      // already written against them; same meaning, corrected values.
      put(fields, "llm_input_token", f.prompt());
      put(fields, "llm_cached_input_token", f.cached());
      put(fields, "llm_output_token", f.completion());
      put(fields, "llm_total_token", f.total());
    }
    String model = report.model() != null ? report.model() : fallbackModel;
    if (model != null) {
      fields.putFields("model", Value.newBuilder().setStringValue(model).build());
    }
    fields.putFields("corrected", Value.newBuilder().setBoolValue(report.corrected()).build());
    fields.putFields("outcome", Value.newBuilder().setStringValue(report.outcome().label()).build());
    putRefused(fields, refused);
    return wrap(namespace, fields);
  }

  /** Metadata for an exchange decided at response headers: outcome, model and refused inputs only. */
  static Struct outcomeOnly(String namespace, Outcome outcome, String model, String refused) {
    Struct.Builder fields = Struct.newBuilder();
    if (model != null) {
      fields.putFields("model", Value.newBuilder().setStringValue(model).build());
    }
    fields.putFields("outcome", Value.newBuilder().setStringValue(outcome.label()).build());
    putRefused(fields, refused);
    return wrap(namespace, fields);
  }

  /** The inputs the classifier refused ({@code RefusedInput} labels, comma-separated), when there were any. */
  private static void putRefused(Struct.Builder fields, String refused) {
    if (refused != null) {
      fields.putFields("refused_inputs", Value.newBuilder().setStringValue(refused).build());
    }
  }

  private static void put(Struct.Builder fields, String key, BigInteger value) {
    if (value != null) {
      fields.putFields(key, Value.newBuilder().setNumberValue(value.doubleValue()).build());
    }
  }

  private static Struct wrap(String namespace, Struct.Builder fields) {
    return Struct.newBuilder()
        .putFields(namespace, Value.newBuilder().setStructValue(fields).build())
        .build();
  }
}
