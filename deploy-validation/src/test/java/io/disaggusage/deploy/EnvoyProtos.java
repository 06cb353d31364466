package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.Any;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import io.envoyproxy.envoy.config.bootstrap.v3.Bootstrap;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.listener.v3.Filter;
import io.envoyproxy.envoy.config.route.v3.FilterConfig;
import io.envoyproxy.envoy.config.route.v3.Route;
import io.envoyproxy.envoy.config.route.v3.VirtualHost;
import io.envoyproxy.envoy.extensions.access_loggers.file.v3.FileAccessLog;
import io.envoyproxy.envoy.extensions.access_loggers.stream.v3.StdoutAccessLog;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.router.v3.Router;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import io.envoyproxy.envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext;
import io.envoyproxy.envoy.extensions.upstreams.http.v3.HttpProtocolOptions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Strict parsing of Envoy configuration into Envoy's own protobuf types. The type registry is an
 * explicit allow-list of the extensions the shipped configs may use: an {@code @type} outside it, an
 * unknown field or a bad enum value fails.
 */
final class EnvoyProtos {
  /** Every extension type a shipped config may name in an {@code Any}. */
  static final JsonFormat.TypeRegistry REGISTRY =
      JsonFormat.TypeRegistry.newBuilder()
          .add(HttpConnectionManager.getDescriptor())
          .add(ExternalProcessor.getDescriptor())
          .add(Router.getDescriptor())
          .add(HttpProtocolOptions.getDescriptor())
          .add(FileAccessLog.getDescriptor())
          .add(StdoutAccessLog.getDescriptor())
          .add(UpstreamTlsContext.getDescriptor())
          .add(FilterConfig.getDescriptor())
          .add(com.github.udpa.udpa.type.v1.TypedStruct.getDescriptor())
          .add(com.github.xds.type.v3.TypedStruct.getDescriptor())
          .build();

  private static final JsonFormat.Parser PARSER = JsonFormat.parser().usingTypeRegistry(REGISTRY);

  /** The proto an Istio EnvoyFilter {@code patch.value} has, by {@code applyTo}. */
  static final Map<String, Descriptor> PATCH_TYPES =
      Map.of(
          "HTTP_FILTER", HttpFilter.getDescriptor(),
          "CLUSTER", Cluster.getDescriptor(),
          "NETWORK_FILTER", Filter.getDescriptor(),
          "VIRTUAL_HOST", VirtualHost.getDescriptor(),
          "HTTP_ROUTE", Route.getDescriptor(),
          "LISTENER", io.envoyproxy.envoy.config.listener.v3.Listener.getDescriptor());

  private EnvoyProtos() {}

  /** Parses {@code node} strictly into {@code builder}. */
  static <B extends Message.Builder> B parse(JsonNode node, B builder) {
    try {
      PARSER.merge(YamlDocuments.JSON.writeValueAsString(node), builder);
      return builder;
    } catch (InvalidProtocolBufferException | com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  static Bootstrap bootstrap(JsonNode node) {
    return parse(node, Bootstrap.newBuilder()).build();
  }

  /** Parses a value into the message type {@code descriptor} names (for EnvoyFilter patches). */
  static Message parse(JsonNode node, Descriptor descriptor) {
    return parse(node, DynamicMessage.newBuilder(descriptor)).build();
  }

  /** Unpacks an {@code Any} (resolving TypedStruct wrappers) with the registry's types. */
  static Message unpack(Any any) {
    try {
      Descriptor type = descriptorFor(any.getTypeUrl());
      if (type == null) {
        throw new IllegalArgumentException("type not in the allow-list: " + any.getTypeUrl());
      }
      Message message = DynamicMessage.parseFrom(type, any.getValue());
      if (type.getFullName().endsWith(".TypedStruct")) {
        return typedStructValue(message);
      }
      return message;
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /** The registered type a type URL names, or null. */
  static Descriptor descriptorFor(String typeUrl) {
    return REGISTRY.find(typeUrl.substring(typeUrl.lastIndexOf('/') + 1));
  }

  /** A TypedStruct's {@code value}, re-parsed strictly into the type its {@code type_url} names. */
  private static Message typedStructValue(Message typedStruct) throws InvalidProtocolBufferException {
    Descriptor d = typedStruct.getDescriptorForType();
    String typeUrl = (String) typedStruct.getField(d.findFieldByName("type_url"));
    Message value = (Message) typedStruct.getField(d.findFieldByName("value"));
    Descriptor target = descriptorFor(typeUrl);
    if (target == null) {
      throw new IllegalArgumentException("TypedStruct type not in the allow-list: " + typeUrl);
    }
    DynamicMessage.Builder b = DynamicMessage.newBuilder(target);
    PARSER.merge(JsonFormat.printer().print(value), b);
    return b.build();
  }

  /**
   * Every set field marked {@code deprecated} in Envoy's protos, anywhere in {@code message},
   * including inside {@code Any} values: e.g. {@code Cluster.http2_protocol_options}.
   */
  static List<String> deprecatedFields(Message message) {
    List<String> found = new ArrayList<>();
    walkDeprecated(message, message.getDescriptorForType().getName(), found);
    return found;
  }

  private static void walkDeprecated(Message message, String path, List<String> found) {
    if (message.getDescriptorForType().getFullName().equals(Any.getDescriptor().getFullName())) {
      Any any = toAny(message);
      walkDeprecated(unpack(any), path + "<" + any.getTypeUrl() + ">", found);
      return;
    }
    for (Map.Entry<FieldDescriptor, Object> e : message.getAllFields().entrySet()) {
      FieldDescriptor f = e.getKey();
      String fieldPath = path + "." + f.getName();
      if (f.getOptions().getDeprecated()) {
        found.add(fieldPath);
      }
      if (f.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
        if (f.isRepeated() && !f.isMapField()) {
          int i = 0;
          for (Object item : (List<?>) e.getValue()) {
            walkDeprecated((Message) item, fieldPath + "[" + i++ + "]", found);
          }
        } else if (f.isMapField()) {
          for (Object entry : (List<?>) e.getValue()) {
            walkDeprecated((Message) entry, fieldPath, found);
          }
        } else {
          walkDeprecated((Message) e.getValue(), fieldPath, found);
        }
      } else if (f.getJavaType() == FieldDescriptor.JavaType.ENUM) {
        var values = f.isRepeated() ? (List<?>) e.getValue() : List.of(e.getValue());
        for (Object v : values) {
          var ev = (com.google.protobuf.Descriptors.EnumValueDescriptor) v;
          if (ev.getOptions().getDeprecated()) {
            found.add(fieldPath + "=" + ev.getName());
          }
        }
      }
    }
  }

  private static Any toAny(Message message) {
    if (message instanceof Any any) {
      return any;
    }
    try {
      return Any.parseFrom(message.toByteString());
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(e);
    }
  }
}
