package io.disaggusage.extproc.rewrite;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.usage.UsageFigures;
import java.io.IOException;

/**
 * Outcome reporting of a JSON generation leg: what became of its usage object (rewritten, left alone,
 * given up for size, or the body malformed), whether it was handed out, and the model the body names.
 */
final class JsonOutcome {
  /** Decodes the model string (a short, already checked JSON string); default limits suffice. */
  private static final JsonFactory STRINGS = new JsonFactory();

  private Outcome outcome; // set when the held usage was released
  private UsageFigures figures;
  private boolean corrected;
  private boolean usageTaken;
  private boolean usageOversize; // the last usage member's object was given up for its size
  private boolean malformed;
  private byte[] modelText;
  private String model;

  /** The held usage was released under {@code released}. */
  void released(Outcome released, UsageFigures emitted, boolean changed) {
    outcome = released;
    figures = emitted;
    corrected = changed;
  }

  /** Whether the last usage member's object was given up for its size. */
  void usageOversize(boolean oversize) {
    usageOversize = oversize;
  }

  void malformed() {
    malformed = true;
  }

  /** What was ready was handed out: the usage object too, if it was released. */
  void handedOut() {
    usageTaken = outcome != null; // the usage object goes out only with everything after it
  }

  boolean usageTaken() {
    return usageTaken;
  }

  /** The report so far; {@code modelText} is the last string model the body named, raw (or null). */
  ExchangeReport report(byte[] modelText) {
    if (malformed) {
      return new ExchangeReport(Outcome.PARSE_ERROR, null, false, null);
    }
    if (outcome != null) {
      return new ExchangeReport(outcome, figures, corrected, model(modelText));
    }
    return new ExchangeReport(usageOversize ? Outcome.OVERSIZE : Outcome.NO_USAGE, null, false, model(modelText));
  }

  /** The model named, decoded; null if none (or not decodable). */
  private String model(byte[] text) {
    if (text != modelText) {
      modelText = text;
      model = text == null ? null : decode(text);
    }
    return model;
  }

  private static String decode(byte[] raw) {
    byte[] quoted = new byte[raw.length + 2];
    quoted[0] = '"';
    System.arraycopy(raw, 0, quoted, 1, raw.length);
    quoted[quoted.length - 1] = '"';
    try (JsonParser p = STRINGS.createParser(quoted)) {
      return p.nextToken() == JsonToken.VALUE_STRING ? p.getText() : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
