# config.json parsing is its own small library so the planner (tools) and the model share it.
add_library(frugal_model_config ${CMAKE_CURRENT_LIST_DIR}/config.cpp)
target_link_libraries(frugal_model_config PUBLIC frugal_core nlohmann_json::nlohmann_json)
