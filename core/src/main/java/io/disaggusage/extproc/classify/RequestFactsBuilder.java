package io.disaggusage.extproc.classify;

import com.fasterxml.jackson.core.JsonFactory;
import io.disaggusage.extproc.usage.ApiShapes;
import io.disaggusage.extproc.usage.ContextUsage;
import io.disaggusage.extproc.usage.UsageDocument;
import java.nio.charset.StandardCharsets;

/**
 * The facts of a request body, filled in from its structure as a reader walks it. The JSON and the
 * MessagePack readers send the same events here, so one logical document gives the same
 * {@link RequestFacts} whatever its encoding. Only the top two levels are examined; the value of
 * {@code disaggregated_params.ctx_usage} is read whole by the reader and handed over as JSON.
 * Duplicate members: the last one wins, as in a tree parse.
 */
final class RequestFactsBuilder {
  /** What a scalar value is, as far as the facts care. */
  enum Kind {
    STRING,
    INTEGER,
    TRUE,
    FALSE,
    /** null, a float, or a MessagePack bin/ext value: never a fact's value. */
    OTHER
  }

  /** What a container that starts is to the reader. */
  enum Open {
    /** Not allowed here: the body is not one object. */
    REFUSED,
    /** A container of no particular interest (its members may still be facts). */
    NESTED,
    /** The {@code disaggregated_params.ctx_usage} object: the reader captures it whole. */
    CTX_USAGE
  }

  /** Which fact a scalar at the current position would be. */
  private enum Slot {
    NONE(false),
    MODEL(true),
    STREAM(false),
    BOOTSTRAP_ROOM(true),
    BOOTSTRAP_HOST(true),
    /** An element of a {@code bootstrap_room} array (SGLang n>1 or a batch). */
    BOOTSTRAP_ROOM_ELEMENT(true),
    /** An element of a {@code bootstrap_host} array. */
    BOOTSTRAP_HOST_ELEMENT(true),
    REQUEST_TYPE(true),
    DISAGG_REQUEST_ID(true),
    CTX_REQUEST_ID(true),
    SCHEDULE_STYLE(true),
    REMOTE_DECODE(false),
    REMOTE_PREFILL(false),
    KV_REMOTE_REQUEST_ID(true),
    KV_TRANSFER_ID(true);

    final boolean text;

    Slot(boolean text) {
      this.text = text;
    }
  }

  /** The longest member name a fact is found under: a longer name matches nothing. */
  static final int MAX_NAME_BYTES = "disaggregated_params".length();

  private static final byte[] USAGE_PREFIX = "{\"usage\":".getBytes(StandardCharsets.US_ASCII);

  private final JsonFactory json;

  private int depth;
  private String field1;
  private String field2;
  private boolean rootDone;

  private String model;
  private Boolean stream;
  private String requestType;
  private String disaggRequestId;
  private String ctxRequestId;
  private String scheduleStyle;
  private ContextUsage ctxUsage;
  private boolean remoteDecode;
  private boolean remotePrefill;
  private String kvRemoteRequestId;
  private String kvTransferId;
  private String bootstrapRoom;
  private String bootstrapHost;
  private boolean bootstrapBatched;
  /** The array now open at the top level is a {@code bootstrap_room} / {@code bootstrap_host} one. */
  private boolean inBootstrapArray;
  private BatchDigest batchRooms;
  private BatchDigest batchHosts;

  RequestFactsBuilder(JsonFactory json) {
    this.json = json;
  }

  /** Containers open around the current position (0 outside the root object). */
  int depth() {
    return depth;
  }

  /** An object or array starts. */
  Open open(boolean object) {
    if (depth == 0 && (!object || rootDone)) {
      return Open.REFUSED;
    }
    Open open = Open.NESTED;
    if (depth == 1) {
      inBootstrapArray = !object && ("bootstrap_room".equals(field1) || "bootstrap_host".equals(field1));
      if (inBootstrapArray && "bootstrap_room".equals(field1)) {
        bootstrapBatched = true;
        bootstrapRoom = null;
        batchRooms = new BatchDigest();
      } else if (inBootstrapArray) {
        bootstrapHost = null;
        batchHosts = new BatchDigest();
      }
    } else if (depth == 2 && inBootstrapArray) {
      // A container inside the array: not SGLang's shape, so no key from it.
      (("bootstrap_room".equals(field1)) ? batchRooms : batchHosts).spoil();
    }
    if (depth == 2 && object && "disaggregated_params".equals(field1) && "ctx_usage".equals(field2)) {
      open = Open.CTX_USAGE;
    }
    depth++;
    return open;
  }

  /** The innermost open container ends. */
  void close() {
    depth--;
    rootDone = depth == 0;
    if (depth == 1) {
      inBootstrapArray = false;
    }
  }

  /** Whether the names of the current object can matter (the top two levels). */
  boolean wantsName() {
    return depth == 1 || depth == 2;
  }

  /** A member name; null stands for a name that matches nothing (e.g. one too long to read). */
  void name(String name) {
    if (depth == 1) {
      field1 = name;
      field2 = null;
    } else if (depth == 2) {
      field2 = name;
    }
  }

  /** Whether a scalar here is a fact whose text is needed (not only its kind). */
  boolean wantsText() {
    return slot().text;
  }

  /**
   * A scalar value; {@code text} is its exact text for {@link Kind#STRING} and {@link Kind#INTEGER}
   * (decimal, never through a double) and may be null when {@link #wantsText()} is false.
   *
   * @return false for a scalar outside any object: the body is not one object
   */
  boolean scalar(Kind kind, String text) {
    if (depth == 0) {
      return false;
    }
    switch (slot()) {
      case MODEL -> model = kind == Kind.STRING ? text : null;
      case STREAM -> stream = kind == Kind.TRUE ? Boolean.TRUE : kind == Kind.FALSE ? Boolean.FALSE : null;
      case BOOTSTRAP_ROOM -> {
        bootstrapRoom = idText(kind, text);
        bootstrapBatched = false;
        batchRooms = null;
      }
      case BOOTSTRAP_HOST -> {
        bootstrapHost = kind == Kind.STRING ? text : null;
        batchHosts = null;
      }
      case BOOTSTRAP_ROOM_ELEMENT -> batchRooms.add(idText(kind, text));
      case BOOTSTRAP_HOST_ELEMENT -> batchHosts.add(kind == Kind.STRING ? text : null);
      case REQUEST_TYPE -> requestType = kind == Kind.STRING ? text : null;
      case DISAGG_REQUEST_ID -> disaggRequestId = idText(kind, text);
      case CTX_REQUEST_ID -> ctxRequestId = idText(kind, text);
      case SCHEDULE_STYLE -> scheduleStyle = idText(kind, text);
      case REMOTE_DECODE -> remoteDecode = kind == Kind.TRUE;
      case REMOTE_PREFILL -> remotePrefill = kind == Kind.TRUE;
      case KV_REMOTE_REQUEST_ID -> kvRemoteRequestId = kind == Kind.STRING ? text : null;
      case KV_TRANSFER_ID -> kvTransferId = idText(kind, text);
      case NONE -> {}
    }
    return true;
  }

  /**
   * The {@code ctx_usage} object was read whole, as compact JSON; null when it cannot be a usage
   * object at all. It replaces an earlier one, usable or not (the last member wins).
   */
  void ctxUsage(byte[] usageJson) {
    ctxUsage = usageJson == null ? null : parseCtxUsage(usageJson);
  }

  RequestFacts facts(boolean malformed, PromptFingerprint fingerprint) {
    return new RequestFacts(
        model,
        stream,
        requestType,
        disaggRequestId,
        ctxRequestId,
        scheduleStyle,
        ctxUsage,
        remoteDecode,
        remotePrefill,
        kvRemoteRequestId,
        kvTransferId,
        batchRooms != null ? batchRooms.key() : bootstrapRoom,
        batchHosts != null ? batchHosts.key() : bootstrapHost,
        bootstrapBatched,
        malformed,
        fingerprint);
  }

  private Slot slot() {
    if (depth == 1 && field1 != null) {
      return switch (field1) {
        case "model" -> Slot.MODEL;
        case "stream" -> Slot.STREAM;
        case "bootstrap_room" -> Slot.BOOTSTRAP_ROOM;
        case "bootstrap_host" -> Slot.BOOTSTRAP_HOST;
        default -> Slot.NONE;
      };
    }
    if (depth == 2 && inBootstrapArray) {
      return "bootstrap_room".equals(field1) ? Slot.BOOTSTRAP_ROOM_ELEMENT : Slot.BOOTSTRAP_HOST_ELEMENT;
    }
    if (depth == 2 && field2 != null) {
      if ("disaggregated_params".equals(field1)) {
        return switch (field2) {
          case "request_type" -> Slot.REQUEST_TYPE;
          case "disagg_request_id" -> Slot.DISAGG_REQUEST_ID;
          case "ctx_request_id" -> Slot.CTX_REQUEST_ID;
          case "schedule_style" -> Slot.SCHEDULE_STYLE;
          default -> Slot.NONE;
        };
      }
      if ("kv_transfer_params".equals(field1)) {
        return switch (field2) {
          case "do_remote_decode" -> Slot.REMOTE_DECODE;
          case "do_remote_prefill" -> Slot.REMOTE_PREFILL;
          case "remote_request_id" -> Slot.KV_REMOTE_REQUEST_ID;
          case "transfer_id" -> Slot.KV_TRANSFER_ID;
          default -> Slot.NONE;
        };
      }
    }
    return Slot.NONE;
  }

  /** Integer ids keep their exact decimal spelling; string ids their text; anything else is no id. */
  private static String idText(Kind kind, String text) {
    return kind == Kind.INTEGER || kind == Kind.STRING ? text : null;
  }

  private ContextUsage parseCtxUsage(byte[] usageJson) {
    byte[] doc = new byte[USAGE_PREFIX.length + usageJson.length + 1];
    System.arraycopy(USAGE_PREFIX, 0, doc, 0, USAGE_PREFIX.length);
    System.arraycopy(usageJson, 0, doc, USAGE_PREFIX.length, usageJson.length);
    doc[doc.length - 1] = '}';
    try {
      var parsed = UsageDocument.parse(json, doc);
      return parsed.usage() == null ? null : ApiShapes.context(parsed.usage(), doc).orElse(null);
    } catch (UsageDocument.MalformedException e) {
      return null;
    }
  }
}
