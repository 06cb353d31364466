package io.disaggusage.extproc.usage;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import io.disaggusage.extproc.json.JsonObjectView;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * What the service needs from one complete JSON document (a response body or one SSE event's data):
 * where its usage object is, the model, and the TensorRT-LLM context ids. Usage is looked for at the
 * top level ({@code usage}) and inside the root's members that any {@link ApiShape} names as
 * {@linkplain ApiShape#usageContainers usage containers} ({@code response}, {@code message}), whatever
 * the document's own shape.
 *
 * @param usage the effective (last) non-null usage object, or null
 * @param model the document's {@code model} (or a usage container's, such as {@code response.model}), or null
 * @param contextIds TensorRT-LLM {@code ctx_request_id} / {@code disagg_request_id} values found in
 *     {@code choices[0].disaggregated_params} or top-level {@code disaggregated_params}, as exact
 *     decimal (or string) text
 * @param kvRemoteRequestId the root's {@code kv_transfer_params.remote_request_id} string: the handle by
 *     which a vLLM prefill response names its KV transfer, which the decode request carries back; or null
 * @param carriesContent the root's {@code choices} is a non-empty array: a stream event whose usage is
 *     the running usage of a content event (vLLM's {@code continuous_usage_stats}, or the first of the
 *     two events vLLM may split its final usage over), not the stream's usage-only event
 */
public record UsageDocument(
    JsonObjectView usage,
    String model,
    List<String> contextIds,
    String kvRemoteRequestId,
    boolean carriesContent) {

  private static final Set<String> DETAIL_KEYS = ApiShapes.usageDetailObjects();
  private static final Set<String> CONTAINERS = ApiShapes.usageContainers();
  private static final Set<String> ID_KEYS = Set.of("ctx_request_id", "disagg_request_id");

  /** Thrown for anything that is not one well-formed JSON object. */
  public static final class MalformedException extends Exception {
    public MalformedException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** A factory whose constraints admit any document the service's byte caps admit. */
  public static JsonFactory newFactory(int maxDocumentBytes) {
    return JsonFactory.builder()
        .streamReadConstraints(
            StreamReadConstraints.builder()
                .maxStringLength(Math.max(maxDocumentBytes, 1024))
                .maxNumberLength(1000)
                .maxNestingDepth(1000)
                .build())
        .build();
  }

  /** Parses {@code doc} entirely; offsets in the result are indexes into {@code doc}. */
  public static UsageDocument parse(JsonFactory factory, byte[] doc) throws MalformedException {
    try (JsonParser p = factory.createParser(doc)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new MalformedException("not a JSON object", null);
      }
      Walk walk = new Walk();
      walk.root(p);
      if (p.nextToken() != null) {
        throw new MalformedException("trailing content after the JSON object", null);
      }
      return new UsageDocument(
          walk.usage, walk.model, List.copyOf(walk.ids), walk.kvRemoteRequestId, walk.choices > 0);
    } catch (IOException | RuntimeException e) {
      throw new MalformedException("malformed JSON: " + e.getClass().getSimpleName(), e);
    }
  }

  /**
   * Reads a usage object that is the whole of {@code usage[0, length)}, a fragment cut from a larger
   * document; offsets in the view index into {@code usage}.
   */
  public static JsonObjectView usageObject(JsonFactory factory, byte[] usage, int length)
      throws MalformedException {
    try (JsonParser p = factory.createParser(usage, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new MalformedException("not a JSON object", null);
      }
      JsonObjectView view = JsonObjectView.read(p, DETAIL_KEYS);
      if (p.nextToken() != null) {
        throw new MalformedException("trailing content after the usage object", null);
      }
      return view;
    } catch (IOException | RuntimeException e) {
      throw new MalformedException("malformed JSON: " + e.getClass().getSimpleName(), e);
    }
  }

  /** Reads one member of a JSON object: the parser stands on the member's value. */
  @FunctionalInterface
  private interface MemberReader {
    void read(String name, JsonToken value) throws IOException;
  }

  /**
   * Hands each member of the object that {@code value} opens to {@code reader}, or skips {@code
   * value} when it is not an object. Returns with the parser on the object's closing brace.
   */
  private static void eachMember(JsonParser p, JsonToken value, MemberReader reader) throws IOException {
    if (value != JsonToken.START_OBJECT) {
      p.skipChildren();
      return;
    }
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      reader.read(name, p.nextToken());
    }
  }

  /** One pass over the document, keeping only the parts of interest. */
  private static final class Walk {
    JsonObjectView usage;
    String model;
    int choices; // elements of the root's last choices array
    final List<String> ids = new ArrayList<>(2);
    String kvRemoteRequestId;

    /** The root object, whose opening brace the parser has just read. */
    void root(JsonParser p) throws IOException {
      eachMember(p, JsonToken.START_OBJECT, (name, value) -> {
        switch (name) {
          case "usage" -> usage(p, value);
          case "model" -> model(p, value);
          case "choices" -> choices(p, value);
          case "disaggregated_params" -> ids(p, value);
          case "kv_transfer_params" -> kvTransfer(p, value);
          default -> {
            if (CONTAINERS.contains(name)) {
              container(p, value);
            } else {
              p.skipChildren();
            }
          }
        }
      });
    }

    void usage(JsonParser p, JsonToken value) throws IOException {
      if (value == JsonToken.START_OBJECT) {
        usage = JsonObjectView.read(p, DETAIL_KEYS);
      } else {
        usage = null; // last occurrence wins, including a null one
        p.skipChildren();
      }
    }

    void model(JsonParser p, JsonToken value) throws IOException {
      if (value == JsonToken.VALUE_STRING) {
        model = p.getText();
      } else {
        p.skipChildren();
      }
    }

    /** A usage container of the root ({@code response}, ...), which may hold usage and model. */
    void container(JsonParser p, JsonToken value) throws IOException {
      eachMember(p, value, (name, inner) -> {
        switch (name) {
          case "usage" -> usage(p, inner);
          case "model" -> model(p, inner);
          case "disaggregated_params" -> ids(p, inner);
          default -> p.skipChildren();
        }
      });
    }

    /** Only the first choice is read: its {@code disaggregated_params}. */
    void choices(JsonParser p, JsonToken value) throws IOException {
      if (value != JsonToken.START_ARRAY) {
        p.skipChildren();
        return;
      }
      boolean first = true;
      choices = 0;
      JsonToken element;
      while ((element = p.nextToken()) != JsonToken.END_ARRAY) {
        choices++;
        if (first) {
          eachMember(p, element, (name, inner) -> {
            if (name.equals("disaggregated_params")) {
              ids(p, inner);
            } else {
              p.skipChildren();
            }
          });
        } else {
          p.skipChildren();
        }
        first = false;
      }
    }

    /** The last {@code remote_request_id} of the root's {@code kv_transfer_params}, when a string. */
    void kvTransfer(JsonParser p, JsonToken value) throws IOException {
      if (value != JsonToken.START_OBJECT) {
        kvRemoteRequestId = null; // the last member wins, including a null one
      }
      eachMember(p, value, (name, inner) -> {
        if (name.equals("remote_request_id")) {
          kvRemoteRequestId = inner == JsonToken.VALUE_STRING ? p.getText() : null;
        }
        p.skipChildren();
      });
    }

    void ids(JsonParser p, JsonToken value) throws IOException {
      eachMember(p, value, (name, inner) -> {
        if (ID_KEYS.contains(name)
            && (inner == JsonToken.VALUE_NUMBER_INT || inner == JsonToken.VALUE_STRING)) {
          ids.add(p.getText());
        } else {
          p.skipChildren();
        }
      });
    }
  }
}
